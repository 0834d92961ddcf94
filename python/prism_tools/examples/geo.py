"""Maps and travel tools: geocoding, distances, routes, places, flights, hotels, cars, trains."""

from __future__ import annotations

import math
from datetime import datetime, timedelta

from prism_tools.examples._build import (
    CITIES,
    CITY,
    CURRENCY,
    DAY_RANGE_NOTE,
    LIMIT,
    Args,
    City,
    Draw,
    Spec,
    at_time,
    boolean,
    chance,
    check_day,
    choice,
    company,
    const,
    day,
    echo,
    email,
    find_city,
    fmt,
    group,
    ident,
    integer,
    money,
    num_arg,
    number,
    parse_day,
    pick,
    rint,
    rnum,
    rows,
    string,
    strings,
    text_arg,
    tool,
)
from prism_tools.types import JSONValue

EARTH_RADIUS_KM = 6371.0088
PLACE = string("place", "Address, landmark or city.", example="Lisbon")
ORIGIN = string("origin", "Start: address or city.", example="Lisbon")
DESTINATION = string("destination", "End: address or city.", example="Madrid")
LAT = number("lat", "Latitude in degrees.", minimum=-90, maximum=90, example=38.7223)
LON = number("lon", "Longitude in degrees.", minimum=-180, maximum=180, example=-9.1393)
MODE = choice("mode", "Travel mode.", ("driving", "walking", "cycling", "transit"),
              required=False, default="driving")  # fmt: skip
BOOKING_REF = string("booking_reference", "Six-character booking code.",
                     pattern="^[A-Z0-9]{6}$", example="QX7P2K")  # fmt: skip
AIRPORT = "IATA airport code, e.g. 'LIS'."
CABINS = ("economy", "premium_economy", "business", "first")

# Average door-to-door speeds (km/h) and a detour factor over the straight line.
SPEEDS = {"driving": 70.0, "walking": 4.8, "cycling": 16.0, "transit": 45.0}
DETOUR = 1.25
MAX_ROUTE_STOPS = 25
"""The most stops optimize_route_order orders, like a routing API's waypoint limit: its
nearest-neighbour search is quadratic in the number of stops."""


def haversine_km(a_lat: float, a_lon: float, b_lat: float, b_lon: float) -> float:
    """Great-circle distance between two points."""
    p1, p2 = math.radians(a_lat), math.radians(b_lat)
    dp, dl = p2 - p1, math.radians(b_lon - a_lon)
    h = math.sin(dp / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(dl / 2) ** 2
    # Rounding can push h a hair past 1 for nearly antipodal points; asin would refuse it.
    return 2 * EARTH_RADIUS_KM * math.asin(math.sqrt(min(1.0, max(0.0, h))))


def bearing_deg(a_lat: float, a_lon: float, b_lat: float, b_lon: float) -> float:
    """Initial compass bearing from the first point to the second."""
    p1, p2 = math.radians(a_lat), math.radians(b_lat)
    dl = math.radians(b_lon - a_lon)
    x = math.sin(dl) * math.cos(p2)
    y = math.cos(p1) * math.sin(p2) - math.sin(p1) * math.cos(p2) * math.cos(dl)
    return (math.degrees(math.atan2(x, y)) + 360) % 360


def _compass(degrees: float) -> str:
    return ("N", "NE", "E", "SE", "S", "SW", "W", "NW")[round(degrees / 45) % 8]


def _trip(origin: City, destination: City, mode: object) -> dict[str, JSONValue]:
    straight = haversine_km(origin.lat, origin.lon, destination.lat, destination.lon)
    road = straight * DETOUR
    speed = SPEEDS.get(str(mode), SPEEDS["driving"])
    return {
        "origin": origin.name,
        "destination": destination.name,
        "mode": mode,
        "distance_km": round(road, 1),
        "duration_minutes": round(road / speed * 60),
    }


def geocode(args: Args) -> JSONValue:
    city = find_city(text_arg(args, "place"))
    return {"query": args.get("place"), "name": city.name, "country": city.country,
            "lat": city.lat, "lon": city.lon, "known": city.country != "ZZ"}  # fmt: skip


def reverse_geocode(args: Args) -> JSONValue:
    lat, lon = num_arg(args, "lat"), num_arg(args, "lon")
    nearest = min(CITIES, key=lambda city: haversine_km(lat, lon, city.lat, city.lon))
    return {
        "nearest_city": nearest.name,
        "country": nearest.country,
        "distance_km": round(haversine_km(lat, lon, nearest.lat, nearest.lon), 1),
    }


def distance(args: Args) -> JSONValue:
    a, b = find_city(args.get("origin")), find_city(args.get("destination"))
    km = haversine_km(a.lat, a.lon, b.lat, b.lon)
    heading = bearing_deg(a.lat, a.lon, b.lat, b.lon)
    return {
        "origin": a.name,
        "destination": b.name,
        "great_circle_km": round(km, 1),
        "great_circle_miles": round(km * 0.621371, 1),
        "initial_bearing_deg": round(heading, 1),
        "direction": _compass(heading),
    }


def directions(args: Args) -> JSONValue:
    a, b = find_city(args.get("origin")), find_city(args.get("destination"))
    trip = _trip(a, b, args.get("mode"))
    heading = _compass(bearing_deg(a.lat, a.lon, b.lat, b.lon))
    km = float(trip["distance_km"])
    trip["steps"] = [
        {"instruction": f"Head {heading} out of {a.name}", "distance_km": round(km * 0.05, 1)},
        {"instruction": f"Continue {heading} on the main route", "distance_km": round(km * 0.9, 1)},
        {"instruction": f"Arrive in {b.name}", "distance_km": round(km * 0.05, 1)},
    ]
    return trip


def travel_time(args: Args) -> JSONValue:
    return _trip(find_city(args.get("origin")), find_city(args.get("destination")),
                 args.get("mode"))  # fmt: skip


def timezone_for(args: Args) -> JSONValue:
    city = find_city(text_arg(args, "place"))
    hours = int(city.utc_offset)
    minutes = round(abs(city.utc_offset - hours) * 60)
    sign = "+" if city.utc_offset >= 0 else "-"
    return {"place": city.name, "timezone": city.timezone,
            "utc_offset": f"{sign}{abs(hours):02d}:{minutes:02d}"}  # fmt: skip


def convert_local_time(args: Args) -> JSONValue:
    source, target = find_city(args.get("from_city")), find_city(args.get("to_city"))
    raw = text_arg(args, "local_time")
    try:
        when = datetime.fromisoformat(raw)
    except ValueError as err:
        raise ValueError("'local_time' must look like 2025-03-14T09:30") from err
    check_day(when, "local_time")
    shifted = when.replace(tzinfo=None) + timedelta(hours=target.utc_offset - source.utc_offset)
    return {
        "from": {"city": source.name, "local_time": when.replace(tzinfo=None).isoformat()},
        "to": {"city": target.name, "local_time": shifted.isoformat()},
        "difference_hours": target.utc_offset - source.utc_offset,
        "note": "Standard-time offsets; daylight saving is not applied.",
    }


def optimize_route(args: Args) -> JSONValue:
    stops = args.get("stops")
    if not isinstance(stops, list) or len(stops) < 2:
        raise ValueError("'stops' needs at least two places")
    if len(stops) > MAX_ROUTE_STOPS:
        raise ValueError(f"'stops' takes at most {MAX_ROUTE_STOPS} places, got {len(stops)}")
    places = [find_city(stop) for stop in stops]
    # Nearest-neighbour from the first stop: simple, and fine for a handful of stops.
    order, remaining = [0], set(range(1, len(places)))
    total = 0.0
    while remaining:
        here = places[order[-1]]
        nxt = min(remaining, key=lambda i: haversine_km(here.lat, here.lon, places[i].lat,
                                                        places[i].lon))  # fmt: skip
        total += haversine_km(here.lat, here.lon, places[nxt].lat, places[nxt].lon)
        order.append(nxt)
        remaining.remove(nxt)
    return {"order": [stops[i] for i in order], "total_km": round(total * DETOUR, 1)}


def midpoint(args: Args) -> JSONValue:
    a, b = find_city(args.get("origin")), find_city(args.get("destination"))
    p1, p2 = math.radians(a.lat), math.radians(b.lat)
    l1, dl = math.radians(a.lon), math.radians(b.lon - a.lon)
    bx, by = math.cos(p2) * math.cos(dl), math.cos(p2) * math.sin(dl)
    lat = math.atan2(math.sin(p1) + math.sin(p2), math.sqrt((math.cos(p1) + bx) ** 2 + by**2))
    lon = l1 + math.atan2(by, math.cos(p1) + bx)
    mid_lat, mid_lon = math.degrees(lat), (math.degrees(lon) + 540) % 360 - 180
    nearest = min(CITIES, key=lambda city: haversine_km(mid_lat, mid_lon, city.lat, city.lon))
    return {"lat": round(mid_lat, 4), "lon": round(mid_lon, 4), "nearest_city": nearest.name}


def _flights(draw: Draw, args: Args) -> JSONValue:
    a, b = find_city(args.get("origin")), find_city(args.get("destination"))
    km = haversine_km(a.lat, a.lon, b.lat, b.lon)
    minutes = round(km / 800 * 60 + 35)
    when = parse_day(args.get("date"))
    out: list[JSONValue] = []
    for index in range(3):
        item = draw.sub(index)
        depart = datetime.combine(when, datetime.min.time()) + timedelta(
            hours=item.sub("h").integer(6, 21), minutes=item.sub("m").pick((0, 15, 30, 45))
        )
        stops = 0 if km < 3000 else item.sub("s").integer(0, 1)
        out.append(
            {
                "flight": f"{item.sub('al').pick(('TP', 'IB', 'LH', 'AF', 'BA', 'KL'))}"
                f"{item.sub('n').integer(100, 2999)}",
                "departs": depart.isoformat(),
                "arrives": (depart + timedelta(minutes=minutes + stops * 90)).isoformat(),
                "stops": stops,
                "price": {"amount": round(40 + km * item.sub("p").number(0.05, 0.14), 2),
                          "currency": "EUR"},
            }
        )  # fmt: skip
    return out


ADVISORY_LEVELS = ("Exercise normal precautions.", "Exercise increased caution.",
                   "Reconsider travel.", "Do not travel.")  # fmt: skip


def _advisory(draw: Draw, args: Args) -> JSONValue:
    # Most destinations sit at the lowest levels.
    level = 1 + int(draw.unit() ** 3 * 4)
    return {"level": level, "summary": ADVISORY_LEVELS[level - 1]}


def _free_seats(draw: Draw, args: Args) -> JSONValue:
    seats = {(draw.sub(i).integer(3, 38), draw.sub(i).sub("s").pick("ABCDEF")) for i in range(8)}
    return [f"{row}{letter}" for row, letter in sorted(seats)]


# fmt: off
MAPS_SPECS = group(
    "maps",
    tool("geocode_address", "Coordinates of an address or place name.",
         [PLACE], compute=geocode, kind="fetch"),
    tool("reverse_geocode", "The nearest known city to a coordinate.",
         [LAT, LON], compute=reverse_geocode, kind="fetch"),
    tool("calculate_distance", "Great-circle distance and compass direction between two places.",
         [ORIGIN, DESTINATION], compute=distance),
    tool("get_directions", "Route summary and steps between two places.",
         [ORIGIN, DESTINATION, MODE], compute=directions, kind="fetch"),
    tool("estimate_travel_time", "Distance and travel time between two places for a mode.",
         [ORIGIN, DESTINATION, MODE], compute=travel_time),
    tool("find_nearby_places", "Places of a type near a location, nearest first.",
         [PLACE, choice("category", "What to look for.", ("restaurant", "cafe", "pharmacy",
                                                         "atm", "hospital", "supermarket",
                                                         "museum", "gas_station")),
          integer("radius_m", "Search radius in metres.", required=False, minimum=100,
                  maximum=50_000, default=1500), LIMIT],
         {"places": rows({"place_id": ident("plc", 10), "name": lambda d, a: (
             f"{d.pick(('Central', 'Harbour', 'Old Town', 'Riverside'))} "
             f"{str(a.get('category', 'place')).replace('_', ' ').title()}"),
             "distance_m": rint(50, 1500), "rating": rnum(3.2, 4.9, 1), "open_now": chance(0.7)})},
         kind="search"),
    tool("get_place_details", "Address, phone, hours and rating of a place.",
         [string("place_id", "Place id.", example="plc_0f3a9c21b4")],
         {"place_id": echo("place_id"), "name": company(), "phone": lambda d, a:
          f"+351 21 {d.integer(100, 999)} {d.sub('x').integer(1000, 9999)}",
          "hours": const("Mon-Sat 09:00-19:00"), "rating": rnum(3.2, 4.9, 1),
          "reviews": rint(10, 3000)}, kind="fetch"),
    tool("get_traffic_conditions", "Congestion and delays on the way between two places.",
         [ORIGIN, DESTINATION],
         {"level": pick("light", "moderate", "heavy"), "delay_minutes": rint(0, 45),
          "incidents": rint(0, 3)}, kind="fetch"),
    tool("get_elevation", "Ground elevation at a coordinate.",
         [LAT, LON], {"elevation_m": rint(0, 2400)}, kind="fetch"),
    tool("get_timezone", "Time zone and UTC offset of a place.",
         [PLACE], compute=timezone_for),
    tool("find_ev_charging_stations", "Electric vehicle chargers near a place.",
         [PLACE, integer("min_power_kw", "Minimum charger power.", required=False, minimum=3,
                         maximum=350, default=50), LIMIT],
         {"stations": rows({"name": fmt("{place} fast charge"), "power_kw": pick(50, 150, 350),
                            "available": rint(0, 8), "distance_km": rnum(0.2, 12, 1)})},
         kind="search"),
    tool("find_parking", "Car parks near a place with prices.",
         [PLACE, LIMIT],
         {"parking": rows({"name": pick("Central garage", "Station car park", "Market lot"),
                           "hourly_rate": money(1, 6), "free_spaces": rint(0, 300)})},
         kind="search"),
    tool("get_transit_routes", "Public transport options between two places.",
         [ORIGIN, DESTINATION, string("depart_at", "Departure time.", fmt="date-time",
                                      required=False)],
         {"options": rows({"lines": pick(["Metro Blue"], ["Bus 728", "Tram 15"],
                                         ["Suburban train"]),
                           "duration_minutes": rint(15, 90), "transfers": rint(0, 2)},
                          count_arg="none", default=3)}, kind="fetch"),
    tool("optimize_route_order", "Visit order that keeps a multi-stop trip short.",
         [strings("stops", f"Places to visit; the first is the start. At most "
                  f"{MAX_ROUTE_STOPS}.", min_items=2, max_items=MAX_ROUTE_STOPS,
                  example=["Lisbon", "Madrid", "Paris", "Berlin"])],
         compute=optimize_route),
    tool("find_midpoint", "The geographic midpoint between two places.",
         [ORIGIN, DESTINATION], compute=midpoint, kind="think"),
)

TRAVEL_SPECS = group(
    "travel",
    tool("search_flights", "Flights between two cities on a date, with prices.",
         [string("origin", f"Departure city or {AIRPORT}", example="Lisbon"),
          string("destination", f"Arrival city or {AIRPORT}", example="Berlin"),
          day("date", "Departure date."),
          integer("passengers", "Number of travellers.", required=False, minimum=1, maximum=9,
                  default=1),
          choice("cabin", "Cabin class.", CABINS, required=False, default="economy")],
         {"flights": _flights}),
    tool("get_flight_status", "Live status of a flight: gate, delay, times.",
         [string("flight_number", "Flight number.", pattern="^[A-Z0-9]{2}[0-9]{1,4}$",
                 example="TP1234"), day("date", "Flight date.")],
         {"flight_number": echo("flight_number"),
          "status": pick("scheduled", "boarding", "departed", "delayed", "landed"),
          "delay_minutes": pick(0, 0, 15, 40), "gate": lambda d, a: f"{d.pick('ABCD')}"
          f"{d.sub('g').integer(1, 40)}", "terminal": pick("1", "2")}, kind="fetch"),
    tool("book_flight", "Book a flight found by search_flights for named passengers.",
         [string("flight", "Flight number from the search.", example="TP1234"),
          day("date", "Departure date."),
          strings("passenger_names", "Full names as on passports.", example=["Ana Ribeiro"]),
          choice("cabin", "Cabin class.", CABINS, required=False, default="economy")],
         {"booking_reference": lambda d, a: d.hex(6).upper(), "status": const("confirmed"),
          "total": money(60, 1400)}),
    tool("cancel_flight_booking", "Cancel a flight booking and report the refund.",
         [BOOKING_REF],
         {"booking_reference": echo("booking_reference"), "status": const("cancelled"),
          "refund": money(0, 600)}),
    tool("check_in_for_flight", "Online check-in; returns boarding passes.",
         [BOOKING_REF, string("last_name", "Passenger last name.", example="Ribeiro")],
         {"booking_reference": echo("booking_reference"),
          "boarding_pass_url": lambda d, a: f"https://checkin.example.com/bp/{d.hex(10)}",
          "seat": lambda d, a: f"{d.integer(3, 38)}{d.sub('s').pick('ABCDEF')}"}),
    tool("get_seat_map", "Free seats on a flight by row.",
         [string("flight", "Flight number.", example="TP1234"), day("date", "Flight date.")],
         {"free_seats": _free_seats}),
    tool("select_seat", "Choose a seat on a booked flight.",
         [BOOKING_REF, string("seat", "Seat such as '14C'.", pattern="^[0-9]{1,2}[A-K]$",
                              example="14C")],
         {"booking_reference": echo("booking_reference"), "seat": echo("seat"),
          "fee": money(0, 35)}),
    tool("get_baggage_allowance", "Cabin and checked baggage included in a fare.",
         [string("airline", "Airline code.", example="TP"), choice("cabin", "Cabin.", CABINS)],
         {"cabin_bag_kg": pick(8, 10), "checked_bags": pick(0, 1, 2),
          "checked_bag_kg": pick(23, 32)}),
    tool("search_hotels", "Hotels in a city for given dates, with nightly prices.",
         [CITY,
          day("check_in", "Arrival date."), day("check_out", "Departure date.",
                                                example="2025-03-17"),
          integer("guests", "Guests.", required=False, minimum=1, maximum=10, default=2),
          CURRENCY, LIMIT],
         {"hotels": rows({"hotel_id": ident("htl", 8), "name": lambda d, a: (
             f"{d.pick(('Grand', 'Harbour', 'Garden', 'Old Town', 'Station'))} "
             f"{d.sub('k').pick(('Hotel', 'Suites', 'Inn'))} {a.get('city')}"),
             "stars": rint(2, 5), "nightly_rate": money(55, 420), "rating": rnum(6.5, 9.6, 1)})},
         kind="search"),
    tool("book_hotel", "Reserve a room at a hotel.",
         [string("hotel_id", "Hotel id from search_hotels.", example="htl_3e9a0c11"),
          day("check_in", "Arrival date."), day("check_out", "Departure date.",
                                                example="2025-03-17"),
          string("guest_name", "Lead guest.", example="Ana Ribeiro"),
          choice("room_type", "Room type.", ("single", "double", "twin", "suite"),
                 required=False, default="double")],
         {"confirmation": lambda d, a: f"H{d.hex(7).upper()}", "status": const("confirmed"),
          "total": money(110, 2400)}),
    tool("cancel_hotel_booking", "Cancel a hotel reservation.",
         [string("confirmation", "Hotel confirmation code.", example="H3F0A9C1")],
         {"confirmation": echo("confirmation"), "status": const("cancelled"),
          "fee": money(0, 120)}),
    tool("search_rental_cars", "Rental cars at a pickup location for given dates.",
         [string("pickup_location", "City or airport.", example="LIS"),
          day("pickup_date", "Pickup date."), day("return_date", "Return date.",
                                                  example="2025-03-18"), LIMIT],
         {"cars": rows({"car_id": ident("car", 8), "model": pick("Fiat 500", "VW Golf",
                                                                 "Toyota RAV4", "Tesla Model 3"),
                        "supplier": pick("Sunrent", "Roadway", "Coastline Cars"),
                        "total": money(70, 700), "transmission": pick("manual", "automatic")})},
         kind="search"),
    tool("book_rental_car", "Reserve a rental car.",
         [string("car_id", "Car id from search_rental_cars.", example="car_71be0a2d"),
          string("driver_name", "Main driver.", example="Ana Ribeiro"),
          boolean("full_insurance", "Add zero-excess insurance.")],
         {"reservation_id": ident("rsv", 8), "status": const("confirmed")}),
    tool("get_visa_requirements", "Whether a passport holder needs a visa for a destination.",
         [string("passport_country", "Passport country (ISO alpha-2).", pattern="^[A-Z]{2}$",
                 example="PT"),
          string("destination_country", "Destination (ISO alpha-2).", pattern="^[A-Z]{2}$",
                 example="JP"),
          integer("stay_days", "Length of stay.", minimum=1, maximum=365, example=14)],
         {"visa_required": chance(0.3), "max_visa_free_days": pick(30, 90, 180),
          "note": const("Illustrative data only; check the official consulate site.")},
         kind="fetch"),
    tool("get_travel_advisory", "Government travel advice level for a country.",
         [string("country_code", "ISO alpha-2 code.", pattern="^[A-Z]{2}$", example="JP")],
         {"country_code": echo("country_code"), "advice": _advisory}, kind="fetch"),
    tool("search_trains", "Train connections between two cities on a date.",
         [ORIGIN, DESTINATION, day("date", "Travel date.")],
         {"connections": rows({"train": lambda d, a: f"{d.pick(('AV', 'ICE', 'TGV', 'IC'))} "
                                                     f"{d.sub('n').integer(100, 999)}",
                               "departs": at_time(0, 0, base="date"),
                               "duration_minutes": rint(60, 420), "changes": rint(0, 2),
                               "price": money(19, 160)}, count_arg="none", default=3)},
         kind="search"),
    tool("get_loyalty_balance", "Points balance and tier in a travel loyalty programme.",
         [string("programme", "Programme name.", example="Miles&Go"),
          string("member_number", "Member number.", example="MG-0042117")],
         {"points": rint(0, 250_000), "tier": pick("Blue", "Silver", "Gold", "Platinum"),
          "expiring_soon": rint(0, 5000)}),
    tool("convert_local_time", "A local time in one city expressed in another city's time.",
         [string("from_city", "City the time is in.", example="Lisbon"),
          string("to_city", "City to convert to.", example="Tokyo"),
          string("local_time", f"Local date and time, e.g. '2025-03-14T09:30'. {DAY_RANGE_NOTE}",
                 example="2025-03-14T09:30")],
         compute=convert_local_time),
    tool("create_itinerary", "Bundle bookings into one shareable trip itinerary.",
         [string("title", "Trip title.", example="Berlin offsite"),
          strings("booking_references", "Flight, hotel and car references.",
                  example=["QX7P2K", "H3F0A9C1"]),
          email("share_with", "Send a copy to this address.", required=False)],
         {"itinerary_id": ident("itn", 8), "title": echo("title"),
          "items": lambda d, a: len(a.get("booking_references") or [])}),
)
# fmt: on

SPECS: tuple[Spec, ...] = MAPS_SPECS + TRAVEL_SPECS
