"""Everyday tools: health and fitness, smart home, food ordering, entertainment."""

from __future__ import annotations

from prism_tools.examples._build import (
    CITY,
    LIMIT,
    QUERY,
    Args,
    Param,
    Spec,
    at_time,
    boolean,
    chance,
    choice,
    company,
    const,
    each_of,
    echo,
    fmt,
    group,
    ident,
    int_arg,
    integer,
    money,
    num_arg,
    number,
    on_day,
    person,
    pick,
    records,
    rint,
    rnum,
    rows,
    string,
    strings,
    tool,
)
from prism_tools.types import JSONValue


def device(example: str) -> Param:
    """The ``device_id`` parameter, with an example of the right device type."""
    return string("device_id", "Smart home device id such as 'light.kitchen'.",
                  pattern="^[a-z_]+\\.[a-z0-9_]+$", example=example)  # fmt: skip


DEVICE = device("light.kitchen")
LOCK = device("lock.front_door")
THERMOSTAT = device("climate.hallway")
SEX = choice("sex", "Sex used by the formula.", ("female", "male"))
ACTIVITY = {"sedentary": 1.2, "light": 1.375, "moderate": 1.55, "active": 1.725,
            "very_active": 1.9}  # fmt: skip


def bmi(args: Args) -> JSONValue:
    weight, height_cm = num_arg(args, "weight_kg"), num_arg(args, "height_cm")
    value = weight / (height_cm / 100) ** 2
    band = ("underweight" if value < 18.5 else "healthy" if value < 25
            else "overweight" if value < 30 else "obese")  # fmt: skip
    return {"bmi": round(value, 1), "category": band}


def bmr(args: Args) -> JSONValue:
    # Mifflin-St Jeor, then the activity factor for daily energy use.
    weight, height = num_arg(args, "weight_kg"), num_arg(args, "height_cm")
    age = int_arg(args, "age")
    base = 10 * weight + 6.25 * height - 5 * age + (5 if args.get("sex") == "male" else -161)
    factor = ACTIVITY[str(args.get("activity_level"))]
    return {"bmr_kcal": round(base), "daily_kcal": round(base * factor), "factor": factor}


def heart_rate_zones(args: Args) -> JSONValue:
    age = int_arg(args, "age")
    resting = int_arg(args, "resting_heart_rate")
    maximum = 220 - age
    reserve = maximum - resting
    # Karvonen: resting rate plus a share of the heart rate reserve.
    zones = [
        {"zone": index + 1, "name": name, "low_bpm": round(resting + reserve * low),
         "high_bpm": round(resting + reserve * high)}
        for index, (name, low, high) in enumerate(
            (("recovery", 0.5, 0.6), ("endurance", 0.6, 0.7), ("tempo", 0.7, 0.8),
             ("threshold", 0.8, 0.9), ("maximum", 0.9, 1.0)))
    ]  # fmt: skip
    return {"max_heart_rate": maximum, "zones": zones}


def pace(args: Args) -> JSONValue:
    km = num_arg(args, "distance_km")
    seconds = int_arg(args, "duration_seconds")
    per_km = seconds / km
    return {
        "pace_per_km": f"{int(per_km // 60)}:{round(per_km % 60):02d}",
        "speed_kmh": round(km / (seconds / 3600), 2),
        "pace_per_mile": f"{int(per_km * 1.609344 // 60)}:{round(per_km * 1.609344 % 60):02d}",
    }


def water_intake(args: Args) -> JSONValue:
    weight = num_arg(args, "weight_kg")
    minutes = int_arg(args, "exercise_minutes")
    litres = weight * 0.033 + minutes / 30 * 0.35
    return {"litres_per_day": round(litres, 1), "glasses_250ml": round(litres / 0.25)}


def scale_recipe(args: Args) -> JSONValue:
    factor = num_arg(args, "target_servings") / num_arg(args, "original_servings")
    items = args.get("ingredients")
    if not isinstance(items, list):
        raise ValueError("'ingredients' must be a list")
    scaled = []
    for item in items:
        if not isinstance(item, dict):
            raise ValueError("each ingredient needs name, quantity and unit")
        scaled.append({"name": item.get("name"), "unit": item.get("unit"),
                       "quantity": round(num_arg(item, "quantity") * factor, 2)})  # fmt: skip
    return {"factor": round(factor, 4), "ingredients": scaled}


# fmt: off
HEALTH_SPECS = group(
    "health",
    tool("calculate_bmi", "Body mass index and its category.",
         [number("weight_kg", "Weight in kg.", exclusive_minimum=0, maximum=500, example=72),
          number("height_cm", "Height in cm.", minimum=50, maximum=260, example=178)],
         compute=bmi),
    tool("calculate_daily_calories", "Resting (BMR) and daily calorie needs by activity level.",
         [number("weight_kg", "Weight in kg.", exclusive_minimum=0, maximum=500, example=72),
          number("height_cm", "Height in cm.", minimum=50, maximum=260, example=178),
          integer("age", "Age in years.", minimum=1, maximum=120, example=35), SEX,
          choice("activity_level", "Activity level.", tuple(ACTIVITY))],
         compute=bmr),
    tool("calculate_heart_rate_zones", "Training heart-rate zones (Karvonen method).",
         [integer("age", "Age in years.", minimum=10, maximum=100, example=35),
          integer("resting_heart_rate", "Resting pulse.", minimum=30, maximum=120, example=58)],
         compute=heart_rate_zones),
    tool("calculate_running_pace", "Pace per km and per mile and speed for a run.",
         [number("distance_km", "Distance.", minimum=0.01, maximum=1000, example=10),
          integer("duration_seconds", "Finish time in seconds.", minimum=1, maximum=1_000_000,
                  example=3000)],
         compute=pace),
    tool("estimate_water_intake", "Suggested daily water intake from weight and exercise.",
         [number("weight_kg", "Weight in kg.", exclusive_minimum=0, maximum=500, example=70),
          integer("exercise_minutes", "Exercise today.", required=False, minimum=0,
                  maximum=600, default=0)],
         compute=water_intake),
    tool("log_workout", "Record a workout in the fitness log.",
         [choice("activity", "Activity.", ("run", "ride", "swim", "walk", "strength", "yoga")),
          integer("duration_minutes", "Length.", minimum=1, maximum=1440, example=45),
          number("distance_km", "Distance, if any.", required=False, minimum=0, maximum=1000)],
         {"workout_id": ident("wko", 8), "activity": echo("activity"),
          "estimated_kcal": rint(120, 900)}),
    tool("get_sleep_summary", "Sleep duration and stages for a night.",
         [string("date", "The night starting on this date.", fmt="date", example="2025-03-13")],
         {"date": echo("date"), "asleep_minutes": rint(300, 540),
          "stages_minutes": lambda d, a: {"deep": d.sub("d").integer(40, 120),
                                          "rem": d.sub("r").integer(60, 130),
                                          "light": d.sub("l").integer(150, 280)},
          "sleep_score": rint(55, 96)}),
    tool("get_step_count", "Steps, distance and active minutes for a day.",
         [string("date", "Day.", fmt="date", example="2025-03-13")],
         {"date": echo("date"), "steps": rint(1500, 18000), "distance_km": rnum(1, 13, 1),
          "active_minutes": rint(5, 120)}),
    tool("book_doctor_appointment", "Book an appointment with a clinician.",
         [choice("specialty", "Specialty.", ("general_practice", "dermatology", "cardiology",
                                             "physiotherapy", "dentistry")),
          string("preferred_date", "Preferred day.", fmt="date", example="2025-03-20"),
          string("reason", "Reason for the visit.", example="Annual check-up")],
         {"appointment_id": ident("apt", 8), "clinician": person(),
          "starts_at": at_time(0, 2, base="preferred_date"),
          "clinic": pick("Riverside Clinic", "Central Health Centre")}),
    tool("list_medications", "A patient's current prescriptions with refill dates.",
         [string("patient_id", "Patient id.", example="pat_00917")],
         {"medications": each_of(("Atorvastatin 20 mg", "Vitamin D 1000 IU"),
                                 {"dose": pick("once daily", "twice daily"),
                                  "refill_due": on_day(3, 40)}, key="name")}),
    tool("request_prescription_refill", "Ask the pharmacy to refill a prescription.",
         [string("patient_id", "Patient id.", example="pat_00917"),
          string("medication", "Medication name.", example="Atorvastatin 20 mg")],
         {"refill_id": ident("rfl", 8), "ready_on": on_day(1, 3), "pharmacy": company()}),
)

HOME_SPECS = group(
    "home",
    tool("list_smart_devices", "Smart home devices with room and state.",
         [string("room", "Only this room.", required=False)],
         {"devices": each_of(("light.kitchen", "light.living_room", "climate.hallway",
                              "lock.front_door", "sensor.garage"),
                             {"state": pick("on", "off", "locked", "idle"),
                              "online": pick(True, True, True, False)}, key="device_id")}),
    tool("get_device_state", "Current state and attributes of a device.",
         [DEVICE],
         {"device_id": echo("device_id"), "state": pick("on", "off"),
          "last_changed": at_time(-1, 0), "battery_percent": rint(5, 100)}),
    tool("turn_on_device", "Switch a light, plug or appliance on.",
         [DEVICE, integer("brightness_percent", "Brightness for lights.", required=False,
                          minimum=1, maximum=100)],
         {"device_id": echo("device_id"), "state": const("on")}),
    tool("turn_off_device", "Switch a light, plug or appliance off.",
         [DEVICE], {"device_id": echo("device_id"), "state": const("off")}),
    tool("set_thermostat", "Set a thermostat's target temperature and mode.",
         [THERMOSTAT, number("target_c", "Target temperature in Celsius.", minimum=5, maximum=32,
                         example=21),
          choice("mode", "Mode.", ("heat", "cool", "auto", "off"), required=False,
                 default="auto")],
         {"device_id": echo("device_id"), "target_c": echo("target_c"), "mode": echo("mode"),
          "current_c": rnum(15, 26, 1)}),
    tool("lock_door", "Lock a smart lock.",
         [LOCK], {"device_id": echo("device_id"), "state": const("locked")}),
    tool("unlock_door", "Unlock a smart lock (requires the household PIN holder's approval).",
         [LOCK, integer("relock_after_minutes", "Lock again after this long.",
                          required=False, minimum=1, maximum=120, default=5)],
         {"device_id": echo("device_id"), "state": const("unlocked"),
          "relocks_in_minutes": echo("relock_after_minutes")}),
    tool("arm_security_system", "Arm the alarm in away, home or night mode.",
         [choice("mode", "Arming mode.", ("away", "home", "night"))],
         {"mode": echo("mode"), "armed": const(True), "open_sensors": rint(0, 1)}),
    tool("get_energy_usage", "Electricity used per day over recent days.",
         [integer("days", "How many days.", minimum=1, maximum=31, example=7)],
         {"daily_kwh": lambda d, a: [d.sub(i).number(4, 22, 1)
                                     for i in range(int(a.get("days") or 7))],
          "tariff_per_kwh": const(0.24)}),
    tool("run_home_scene", "Activate a saved scene such as 'movie night'.",
         [string("scene", "Scene name.", example="movie night")],
         {"scene": echo("scene"), "devices_changed": rint(2, 9)}),
)

FOOD_SPECS = group(
    "food",
    tool("search_restaurants", "Restaurants in a city by cuisine, with rating and price level.",
         [CITY, string("cuisine", "Cuisine, e.g. 'thai'.", required=False),
          integer("party_size", "People.", required=False, minimum=1, maximum=20, default=2),
          LIMIT],
         {"restaurants": rows({"restaurant_id": ident("rst", 8), "name": lambda d, a: (
             f"{d.pick(('Casa', 'Taberna', 'Bistro', 'Cantina'))} "
             f"{d.sub('n').pick(('Azul', 'do Mar', 'Verde', 'Lumi'))}"),
             "rating": rnum(3.6, 4.9, 1), "price_level": pick("$", "$$", "$$$")})}),
    tool("get_menu", "Menu of a restaurant with prices.",
         [string("restaurant_id", "Restaurant id.", example="rst_9c1d2e3f")],
         {"sections": each_of(("starters", "mains", "desserts"),
                              {"items": rows({"dish": pick("Grilled octopus", "Mushroom risotto",
                                                           "Custard tart", "Garden salad",
                                                           "Bacalhau"),
                                              "price": money(4, 28)},
                                             count_arg="none", default=3)},
                              key="section")}),
    tool("make_restaurant_reservation", "Book a table.",
         [string("restaurant_id", "Restaurant id.", example="rst_9c1d2e3f"),
          string("time", "Reservation time.", fmt="date-time", example="2025-03-14T20:00:00Z"),
          integer("party_size", "People.", minimum=1, maximum=20, example=4),
          string("name", "Name for the booking.", example="Ribeiro")],
         {"reservation_id": ident("res", 8), "status": pick("confirmed", "waitlisted")}),
    tool("cancel_restaurant_reservation", "Cancel a table booking.",
         [string("reservation_id", "Reservation id.", example="res_7a8b9c0d")],
         {"reservation_id": echo("reservation_id"), "status": const("cancelled")}),
    tool("order_food_delivery", "Order dishes for delivery.",
         [string("restaurant_id", "Restaurant id.", example="rst_9c1d2e3f"),
          strings("items", "Dishes, as named on the menu.", example=["Mushroom risotto"]),
          string("address", "Delivery address.", example="Rua Augusta 100, Lisbon")],
         {"order_id": ident("fd", 8), "eta_minutes": rint(20, 55), "total": money(12, 70)}),
    tool("track_food_delivery", "Where a delivery order is.",
         [string("order_id", "Delivery order id.", example="fd_5e6f7a8b")],
         {"order_id": echo("order_id"), "status": pick("preparing", "picked_up", "nearby",
                                                       "delivered"),
          "courier": person(), "eta_minutes": rint(0, 30)}),
    tool("scale_recipe", "Scale ingredient quantities to a different number of servings.",
         [number("original_servings", "Servings the recipe makes.", minimum=0.01,
                 maximum=10_000, example=4),
          number("target_servings", "Servings wanted.", minimum=0.01, maximum=10_000,
                 example=6),
          records(
              "ingredients", "Ingredients.",
              [string("name", "Ingredient.", example="flour"),
               number("quantity", "Amount.", minimum=0, maximum=1_000_000, example=250),
               string("unit", "Unit.", example="g")])],
         compute=scale_recipe),
)

ENTERTAINMENT_SPECS = group(
    "entertainment",
    tool("search_movies", "Films matching a title or keywords.",
         [QUERY, LIMIT],
         {"movies": rows({"movie_id": ident("mov", 6), "title": fmt("{query}"),
                          "year": rint(1980, 2025), "rating": rnum(5, 9, 1),
                          "runtime_minutes": rint(85, 170)})}),
    tool("get_movie_showtimes", "Cinema showtimes for a film in a city on a day.",
         [string("movie_id", "Movie id.", example="mov_1a2b3c"), CITY,
          string("date", "Day.", fmt="date", example="2025-03-14")],
         {"cinemas": rows({"cinema": pick("Cinema Ideal", "Grand Screen", "Odeon Plaza"),
                           "times": pick(["14:30", "18:00", "21:15"], ["16:45", "20:30"])},
                          count_arg="none", default=2)}),
    tool("book_movie_tickets", "Buy cinema tickets for a showing.",
         [string("movie_id", "Movie id.", example="mov_1a2b3c"),
          string("cinema", "Cinema name.", example="Cinema Ideal"),
          string("showtime", "Showing.", fmt="date-time", example="2025-03-14T21:15:00Z"),
          integer("tickets", "Number of tickets.", minimum=1, maximum=10, example=2)],
         {"booking_id": ident("tix", 8), "seats": lambda d, a: [
             f"F{n}" for n in range(7, 7 + int(a.get("tickets") or 1))],
          "total": money(8, 60)}),
    tool("search_music", "Songs, albums or artists matching a query.",
         [QUERY, choice("type", "What to search for.", ("track", "album", "artist"),
                        required=False, default="track"), LIMIT],
         {"results": rows({"id": ident("trk", 8), "title": fmt("{query}"), "artist": person(),
                           "duration_s": rint(120, 420)})}),
    tool("create_playlist", "Create a playlist, optionally with songs.",
         [string("name", "Playlist name.", example="Focus"),
          strings("track_ids", "Songs to add.", required=False, min_items=0),
          boolean("public", "Make it public.")],
         {"playlist_id": ident("pl", 8), "name": echo("name"),
          "tracks": lambda d, a: len(a.get("track_ids") or [])}),
    tool("add_tracks_to_playlist", "Add songs to a playlist.",
         [string("playlist_id", "Playlist id.", example="pl_0c1d2e3f"),
          strings("track_ids", "Songs to add.", example=["trk_9a8b7c6d"])],
         {"playlist_id": echo("playlist_id"), "added": lambda d, a: len(a.get("track_ids") or []),
          "snapshot_id": ident("snp", 8)}),
    tool("get_tv_schedule", "What is on a TV channel on a day.",
         [string("channel", "Channel name.", example="Arte"),
          string("date", "Day.", fmt="date", example="2025-03-14")],
         {"channel": echo("channel"),
          "programmes": rows({"starts": at_time(0, 0, base="date"), "title": pick(
              "Evening News", "Nature Frontiers", "Classic Cinema", "Quiz Night"),
              "duration_minutes": pick(30, 60, 90)}, count_arg="none", default=5)}),
    tool("find_events_nearby", "Concerts, shows and festivals in a city on upcoming dates.",
         [CITY, choice("category", "Event type.", ("music", "theatre", "sports", "comedy",
                                                   "festival"), required=False), LIMIT],
         {"events": rows({"name": pick("Jazz in the Park", "Harbour Lights Festival",
                                       "Derby Night", "Stand-up Showcase"),
                          "date": on_day(1, 45), "venue": company(), "from_price": money(0, 90),
                          "sold_out": chance(0.15)})}),
)
# fmt: on

SPECS: tuple[Spec, ...] = HEALTH_SPECS + HOME_SPECS + FOOD_SPECS + ENTERTAINMENT_SPECS
