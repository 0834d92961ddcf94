"""Weather tools: current conditions, forecasts, air quality, astronomy, alerts."""

from __future__ import annotations

import math
from datetime import date, timedelta

from prism_tools.examples._build import (
    CITY,
    Args,
    City,
    Draw,
    Spec,
    at_time,
    boolean,
    build,
    chance,
    choice,
    day,
    echo,
    find_city,
    group,
    integer,
    nested,
    number,
    on_day,
    parse_day,
    pick,
    rint,
    rnum,
    rows,
    string,
    strings,
    tool,
)
from prism_tools.types import JSONValue

CONDITIONS = ("clear", "partly cloudy", "overcast", "light rain", "heavy rain", "thunderstorms",
              "fog", "snow", "drizzle", "windy")  # fmt: skip
UNITS = choice(
    "units", "Unit system for temperatures and speeds.", ("metric", "imperial"), required=False,
    default="metric",
)  # fmt: skip


def _base_temperature(city: City, when: date) -> float:
    # Warmer near the equator and in the hemisphere's summer; a hash adds day-to-day noise.
    season = math.cos((when.timetuple().tm_yday - 196) / 365 * 2 * math.pi)
    if city.lat < 0:
        season = -season
    mean = 27 - abs(city.lat) * 0.35
    swing = min(abs(city.lat) * 0.25, 14)
    noise = Draw.seeded("temp", city.name, when.isoformat()).number(-3, 3, 1)
    return round(mean + swing * season + noise, 1)


def _temperature(value_c: float, units: object) -> float:
    return round(value_c * 9 / 5 + 32, 1) if units == "imperial" else value_c


def _speed(kmh: float, units: object) -> float:
    return round(kmh * 0.621371, 1) if units == "imperial" else kmh


def _day_weather(city: City, when: date, units: object) -> dict[str, JSONValue]:
    draw = Draw.seeded("weather", city.name, when.isoformat())
    temp = _base_temperature(city, when)
    condition = draw.sub("condition").pick(CONDITIONS)
    if condition == "snow" and temp > 3:
        condition = "light rain"  # keep the fake plausible
    return {
        "date": when.isoformat(),
        "condition": condition,
        "temperature": _temperature(temp, units),
        "temperature_high": _temperature(round(temp + draw.sub("hi").number(1, 6, 1), 1), units),
        "temperature_low": _temperature(round(temp - draw.sub("lo").number(2, 8, 1), 1), units),
        "humidity_percent": draw.sub("humidity").integer(25, 95),
        "wind_speed": _speed(draw.sub("wind").number(0, 45, 1), units),
        "precipitation_chance_percent": draw.sub("rain").integer(0, 100)
        if "rain" in condition or "storm" in condition or "snow" in condition
        else draw.sub("rain").integer(0, 20),
    }


def current_weather(args: Args) -> JSONValue:
    city = find_city(args.get("city"))
    units = args.get("units")
    report = _day_weather(city, parse_day(args.get("date")), units)
    return {
        "city": city.name,
        "country": city.country,
        "units": units,
        "temperature_unit": "F" if units == "imperial" else "C",
        "speed_unit": "mph" if units == "imperial" else "km/h",
        **report,
    }


def forecast(args: Args) -> JSONValue:
    city = find_city(args.get("city"))
    units = args.get("units")
    days = args.get("days")
    count = days if isinstance(days, int) else 3
    start = parse_day(args.get("start_date"), name="start_date")
    return {
        "city": city.name,
        "units": units,
        "days": [_day_weather(city, start + timedelta(days=i), units) for i in range(count)],
    }


def hourly(args: Args) -> JSONValue:
    city = find_city(args.get("city"))
    units = args.get("units")
    hours = args.get("hours")
    count = hours if isinstance(hours, int) else 12
    when = parse_day(args.get("date"))
    base = _base_temperature(city, when)
    out: list[JSONValue] = []
    for hour in range(count):
        clock = hour % 24
        # Coolest around 05:00, warmest around 15:00.
        curve = math.cos((clock - 15) / 24 * 2 * math.pi) * 4
        draw = Draw.seeded("hourly", city.name, when.isoformat(), hour)
        out.append(
            {
                "hour": f"{clock:02d}:00",
                "temperature": _temperature(round(base + curve, 1), units),
                "condition": draw.pick(CONDITIONS),
                "precipitation_chance_percent": draw.sub("rain").integer(0, 60),
            }
        )
    return {"city": city.name, "date": when.isoformat(), "hours": out}


def sun_times(args: Args) -> JSONValue:
    city = find_city(args.get("city"))
    when = parse_day(args.get("date"))
    # The usual declination/hour-angle approximation; good to a few minutes.
    declination = 23.44 * math.sin(math.radians(360 / 365 * (when.timetuple().tm_yday - 81)))
    lat = math.radians(city.lat)
    cos_h = -math.tan(lat) * math.tan(math.radians(declination))
    if cos_h <= -1:
        return {"city": city.name, "date": when.isoformat(), "polar": "midnight sun"}
    if cos_h >= 1:
        return {"city": city.name, "date": when.isoformat(), "polar": "polar night"}
    half_day_hours = math.degrees(math.acos(cos_h)) / 15
    solar_noon = 12 - (city.lon / 15 - city.utc_offset)

    def clock(hours: float) -> str:
        minutes = round(hours * 60) % (24 * 60)
        return f"{minutes // 60:02d}:{minutes % 60:02d}"

    return {
        "city": city.name,
        "date": when.isoformat(),
        "timezone": city.timezone,
        "sunrise_local": clock(solar_noon - half_day_hours),
        "sunset_local": clock(solar_noon + half_day_hours),
        "day_length_hours": round(half_day_hours * 2, 2),
    }


def compare_cities(args: Args) -> JSONValue:
    cities = args.get("cities")
    names = cities if isinstance(cities, list) else []
    when = parse_day(args.get("date"))
    units = args.get("units")
    table = [
        {"city": find_city(name).name, **_day_weather(find_city(name), when, units)}
        for name in names
    ]
    warmest = max(table, key=lambda row: row["temperature"], default=None)
    return {
        "date": when.isoformat(),
        "cities": table,
        "warmest": None if warmest is None else warmest["city"],
    }


def convert_temperature(args: Args) -> JSONValue:
    value = args.get("value")
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError("'value' must be a number")
    source, target = args.get("from_unit"), args.get("to_unit")
    offsets = {"celsius": 273.15, "fahrenheit": 459.67, "kelvin": 0.0}
    scales = {"celsius": 1.0, "fahrenheit": 5 / 9, "kelvin": 1.0}
    if source not in offsets or target not in offsets:
        raise ValueError(f"units must be one of {sorted(offsets)}")
    kelvin = (float(value) + offsets[str(source)]) * scales[str(source)]
    if kelvin < 0:
        raise ValueError("that temperature is below absolute zero")
    if kelvin < 0:
        raise ValueError("temperature below absolute zero")
    converted = kelvin / scales[str(target)] - offsets[str(target)]
    return {"value": round(converted, 2), "unit": target}


def _air_quality(args: Args) -> JSONValue:
    city = find_city(args.get("city"))
    draw = Draw.seeded("aqi", city.name, parse_day(args.get("date")).isoformat())
    aqi = draw.integer(12, 180)
    band = ("good" if aqi <= 50 else "moderate" if aqi <= 100
            else "unhealthy for sensitive groups" if aqi <= 150 else "unhealthy")  # fmt: skip
    pollutants = build(
        {"pm2_5": rnum(2, 80, 1), "pm10": rnum(5, 120, 1), "o3": rnum(10, 140, 1),
         "no2": rnum(5, 90, 1)},
        draw, args,
    )  # fmt: skip
    return {"city": city.name, "aqi": aqi, "category": band, "pollutants_ugm3": pollutants}


TEMP_UNITS = ("celsius", "fahrenheit", "kelvin")

# fmt: off
SPECS: tuple[Spec, ...] = group(
    "weather",
    tool(
        "get_current_weather",
        "Current weather for a city: condition, temperature, humidity, wind and chance of rain.",
        [CITY, UNITS],
        compute=current_weather,
        kind="fetch",
    ),
    tool(
        "get_weather_forecast",
        "Daily weather forecast for a city for the next 1-14 days.",
        [
            CITY,
            integer("days", "Number of days to forecast.", minimum=1, maximum=14, example=3),
            day("start_date", "First day of the forecast (defaults to today).", required=False),
            UNITS,
        ],
        compute=forecast,
        kind="fetch",
    ),
    tool(
        "get_hourly_forecast",
        "Hour-by-hour temperature and rain chance for a city on one day.",
        [
            CITY,
            day("date", "Day to forecast (defaults to today).", required=False),
            integer("hours", "How many hours to return, from midnight.", required=False,
                    minimum=1, maximum=48, default=12),
            UNITS,
        ],
        compute=hourly,
        kind="fetch",
    ),
    tool(
        "get_air_quality",
        "Air quality index (US AQI) and main pollutant concentrations for a city.",
        [CITY, day("date", "Day of the reading (defaults to today).", required=False)],
        compute=_air_quality,
        kind="fetch",
    ),
    tool(
        "get_uv_index",
        "Peak UV index for a city on a given day, with sun protection advice.",
        [CITY, day("date", "Day of interest (defaults to today).", required=False)],
        {"city": echo("city"), "uv_index": rint(0, 11),
         "advice": pick("No protection needed.", "Wear sunglasses on bright days.",
                        "Seek shade around midday; use SPF 30+.",
                        "Avoid the sun between 11:00 and 16:00.")},
        seed=("city", "date"), kind="fetch",
    ),
    tool(
        "get_pollen_count",
        "Pollen levels (tree, grass, weed) for a city, on a 0-5 scale.",
        [CITY],
        {"city": echo("city"), "tree": rint(0, 5), "grass": rint(0, 5), "weed": rint(0, 5),
         "dominant_allergen": pick("birch", "oak", "ragweed", "timothy grass", "olive")},
        kind="fetch",
    ),
    tool(
        "get_weather_alerts",
        "Active severe weather warnings issued for a city or region.",
        [CITY, choice("min_severity", "Lowest severity to include.",
                      ("minor", "moderate", "severe", "extreme"), required=False,
                      default="moderate")],
        {"city": echo("city"),
         "alerts": rows({"id": lambda d, a: f"alert_{d.hex(8)}",
                         "event": pick("Wind advisory", "Flood watch", "Heat warning",
                                       "Winter storm warning", "Thunderstorm watch"),
                         "severity": pick("moderate", "severe"),
                         "starts": at_time(0, 1), "ends": at_time(1, 3)},
                        count_arg="none", default=1)},
        kind="fetch",
    ),
    tool(
        "get_sunrise_sunset",
        "Local sunrise and sunset times and day length for a city on a date.",
        [CITY, day("date", "Day of interest (defaults to today).", required=False)],
        compute=sun_times,
        kind="fetch",
    ),
    tool(
        "get_historical_weather",
        "Recorded weather for a city on a past date.",
        [CITY, day("date", "Past date to look up.", example="2024-07-14"), UNITS],
        compute=current_weather,
        kind="fetch",
    ),
    tool(
        "get_marine_forecast",
        "Wave height, swell period, sea temperature and wind for a coastal location.",
        [CITY, day("date", "Day to forecast (defaults to today).", required=False)],
        {"location": echo("city"), "wave_height_m": rnum(0.2, 4.5, 1),
         "swell_period_s": rint(5, 16), "sea_temperature_c": rnum(9, 29, 1),
         "wind_knots": rint(2, 30), "small_craft_advisory": chance(0.2)},
        kind="fetch",
    ),
    tool(
        "get_ski_conditions",
        "Snow depth, fresh snow and lift status at a ski resort.",
        [
            string("resort", "Ski resort name.", example="Zermatt"),
        ],
        {"resort": echo("resort"), "base_depth_cm": rint(40, 280), "new_snow_24h_cm": rint(0, 35),
         "lifts_open": rint(4, 40), "lifts_total": rint(40, 52),
         "conditions": pick("powder", "packed powder", "groomed", "icy", "spring snow")},
        kind="fetch",
    ),
    tool(
        "compare_city_weather",
        "Side-by-side weather for several cities on one day, with the warmest named.",
        [
            strings("cities", "Cities to compare.", max_items=10, example=["Lisbon", "Oslo"]),
            day("date", "Day to compare (defaults to today).", required=False),
            UNITS,
        ],
        compute=compare_cities,
        kind="fetch",
    ),
    tool(
        "get_precipitation_outlook",
        "Expected rain or snow totals for a city over the next days.",
        [CITY, integer("days", "Days to cover.", minimum=1, maximum=10, example=5)],
        {"city": echo("city"), "days": echo("days"), "total_mm": rnum(0, 80, 1),
         "wettest_day": on_day(0, 4), "snow_expected": chance(0.15)},
        kind="fetch",
    ),
    tool(
        "get_climate_normals",
        "Long-term monthly averages (temperature, rainfall, sunshine) for a city.",
        [CITY, integer("month", "Month number, 1-12.", minimum=1, maximum=12, example=7)],
        {"city": echo("city"), "month": echo("month"), "mean_high_c": rnum(5, 34, 1),
         "mean_low_c": rnum(-6, 22, 1), "rainfall_mm": rint(5, 220),
         "sunshine_hours": rint(40, 360), "rainy_days": rint(1, 20)},
        seed=("city", "month"), kind="fetch",
    ),
    tool(
        "convert_temperature",
        "Convert a temperature between Celsius, Fahrenheit and Kelvin.",
        [
            number("value", "Temperature to convert.", minimum=-500, maximum=1_000_000_000,
                   example=21.5),
            choice("from_unit", "Unit of the given value.", TEMP_UNITS),
            choice("to_unit", "Unit to convert to.", TEMP_UNITS),
        ],
        compute=convert_temperature,
        kind="think",
    ),
    tool(
        "subscribe_weather_alerts",
        "Subscribe a phone number or email to severe weather alerts for a city.",
        [
            CITY,
            string("destination", "Email address or E.164 phone number to notify.",
                   example="+351912345678"),
            boolean("include_minor", "Also send minor advisories."),
        ],
        {"subscription_id": lambda d, a: f"wsub_{d.hex(10)}", "city": echo("city"),
         "destination": echo("destination"), "status": pick("active")},
    ),
    tool(
        "get_storm_tracker",
        "Tropical storms and hurricanes currently tracked near a region.",
        [choice("basin", "Ocean basin.", ("atlantic", "east_pacific", "west_pacific",
                                         "north_indian", "south_indian"))],
        {"basin": echo("basin"),
         "storms": rows({"name": pick("Alba", "Bruno", "Celia", "Dario", "Elena"),
                         "category": rint(1, 5), "max_wind_kmh": rint(120, 260),
                         "position": nested({"lat": rnum(5, 30, 1), "lon": rnum(-90, 150, 1)}),
                         "heading": pick("NW", "N", "W", "NE")},
                        count_arg="none", default=2)},
        kind="fetch",
    ),
)
# fmt: on
