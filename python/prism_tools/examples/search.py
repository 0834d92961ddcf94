"""Search and knowledge tools: web, news, papers, code, internal wiki, reference data."""

from __future__ import annotations

import asyncio
import inspect
from datetime import date, timedelta

from prism_tools.examples._build import (
    LIMIT,
    MAX_PAYMENT,
    QUERY,
    Args,
    Draw,
    Spec,
    at_time,
    choice,
    company,
    each_of,
    echo,
    fmt,
    group,
    integer,
    link,
    number,
    person,
    pick,
    rint,
    rnum,
    rows,
    string,
    tool,
)
from prism_tools.types import JSONValue, ToolExecutionContext

# A small, fixed reference table: enough for look-ups to give real answers offline.
COUNTRIES: dict[str, dict[str, JSONValue]] = {
    "PT": {"name": "Portugal", "capital": "Lisbon", "currency": "EUR", "calling_code": "+351",
           "languages": ["Portuguese"], "region": "Europe"},
    "ES": {"name": "Spain", "capital": "Madrid", "currency": "EUR", "calling_code": "+34",
           "languages": ["Spanish"], "region": "Europe"},
    "FR": {"name": "France", "capital": "Paris", "currency": "EUR", "calling_code": "+33",
           "languages": ["French"], "region": "Europe"},
    "DE": {"name": "Germany", "capital": "Berlin", "currency": "EUR", "calling_code": "+49",
           "languages": ["German"], "region": "Europe"},
    "GB": {"name": "United Kingdom", "capital": "London", "currency": "GBP",
           "calling_code": "+44", "languages": ["English"], "region": "Europe"},
    "US": {"name": "United States", "capital": "Washington, D.C.", "currency": "USD",
           "calling_code": "+1", "languages": ["English"], "region": "Americas"},
    "CA": {"name": "Canada", "capital": "Ottawa", "currency": "CAD", "calling_code": "+1",
           "languages": ["English", "French"], "region": "Americas"},
    "BR": {"name": "Brazil", "capital": "Brasilia", "currency": "BRL", "calling_code": "+55",
           "languages": ["Portuguese"], "region": "Americas"},
    "MX": {"name": "Mexico", "capital": "Mexico City", "currency": "MXN", "calling_code": "+52",
           "languages": ["Spanish"], "region": "Americas"},
    "JP": {"name": "Japan", "capital": "Tokyo", "currency": "JPY", "calling_code": "+81",
           "languages": ["Japanese"], "region": "Asia"},
    "IN": {"name": "India", "capital": "New Delhi", "currency": "INR", "calling_code": "+91",
           "languages": ["Hindi", "English"], "region": "Asia"},
    "SG": {"name": "Singapore", "capital": "Singapore", "currency": "SGD", "calling_code": "+65",
           "languages": ["English", "Malay", "Mandarin", "Tamil"], "region": "Asia"},
    "KE": {"name": "Kenya", "capital": "Nairobi", "currency": "KES", "calling_code": "+254",
           "languages": ["Swahili", "English"], "region": "Africa"},
    "NG": {"name": "Nigeria", "capital": "Abuja", "currency": "NGN", "calling_code": "+234",
           "languages": ["English"], "region": "Africa"},
    "AU": {"name": "Australia", "capital": "Canberra", "currency": "AUD", "calling_code": "+61",
           "languages": ["English"], "region": "Oceania"},
}  # fmt: skip


def country_info(args: Args) -> JSONValue:
    code = str(args.get("country_code", "")).upper()
    info = COUNTRIES.get(code)
    if info is None:
        raise ValueError(f"no data for country {code!r}; known: {', '.join(sorted(COUNTRIES))}")
    return {"country_code": code, **info}


async def reindex_search_collection(
    args: dict[str, JSONValue], context: ToolExecutionContext
) -> JSONValue:
    """Rebuild a search index in batches, reporting progress after each batch."""
    collection = str(args.get("collection"))
    batches = args.get("batches")
    total_batches = batches if isinstance(batches, int) and batches > 0 else 4
    draw = Draw.seeded("reindex", collection)
    per_batch = draw.integer(200, 2000)
    indexed = 0
    for batch in range(1, total_batches + 1):
        indexed += per_batch
        report = context.progress(
            round(batch / total_batches, 4),
            {"stage": "indexing", "batch": batch, "of": total_batches, "documents": indexed},
        )
        # Inside dispatch the sink is async; a host may hand a plain function, so only await
        # what needs awaiting.
        if inspect.isawaitable(report):
            await report
        await asyncio.sleep(0)  # hand control back, as real batch I/O would
    return {
        "collection": collection,
        "documents_indexed": indexed,
        "batches": total_batches,
        "index_version": draw.sub("v").integer(100, 999),
    }


def easter_sunday(year: int) -> date:
    """Western Easter by the anonymous Gregorian algorithm."""
    a, b, c = year % 19, year // 100, year % 100
    d, e = divmod(b, 4)
    g = (8 * b + 13) // 25
    h = (19 * a + b - d - g + 15) % 30
    i, k = divmod(c, 4)
    leap = (32 + 2 * e + 2 * i - h - k) % 7
    m = (a + 11 * h + 22 * leap) // 451
    month, day = divmod(h + leap - 7 * m + 114, 31)
    return date(year, month, day + 1)


def public_holidays(args: Args) -> JSONValue:
    """Holidays shared by many countries: fixed dates plus the Easter-based ones."""
    year = args.get("year")
    if not isinstance(year, int) or isinstance(year, bool):
        raise ValueError("'year' must be an integer")
    easter = easter_sunday(year)
    days = [
        (date(year, 1, 1), "New Year's Day"),
        (easter - timedelta(days=2), "Good Friday"),
        (easter, "Easter Sunday"),
        (easter + timedelta(days=1), "Easter Monday"),
        (date(year, 5, 1), "Labour Day"),
        (date(year, 12, 25), "Christmas Day"),
    ]
    return {
        "country_code": args.get("country_code"),
        "year": year,
        "holidays": [{"date": when.isoformat(), "name": name} for when, name in days],
        "note": "Common holidays only; national days differ by country.",
    }


RESULT_ROW = {
    "title": fmt("{query}: what to know"),
    "url": link("www", "articles/"),
    "snippet": fmt("An overview of {query}, with examples and common pitfalls."),
    "score": rnum(0.3, 0.99, 3),
}

# fmt: off
SEARCH_SPECS = group(
    "search",
    tool("web_search", "Search the web; returns titles, URLs and snippets, best first.",
         [QUERY, string("language", "Result language (BCP 47).", required=False, default="en"),
          LIMIT],
         {"query": echo("query"), "results": rows(RESULT_ROW)}, kind="search"),
    tool("search_news", "Recent news articles about a topic.",
         [QUERY, choice("freshness", "How recent.", ("day", "week", "month"), required=False,
                        default="week"), LIMIT],
         {"query": echo("query"),
          "articles": rows({"headline": fmt("Latest on {query}"),
                            "source": pick("Harbor Times", "Metro Daily", "Tech Ledger",
                                           "Coastline News"),
                            "published_at": at_time(-6, 0), "url": link("news", "a/")})}),
    tool("search_images", "Images matching a description, with size and licence.",
         [QUERY, choice("licence", "Licence filter.", ("any", "creative_commons", "public_domain"),
                        required=False, default="any"), LIMIT],
         {"images": rows({"url": link("img", "i/"), "width": pick(640, 1280, 1920, 4000),
                          "height": pick(480, 720, 1080, 3000),
                          "licence": pick("CC BY 4.0", "CC0", "All rights reserved")})}),
    tool("search_academic_papers", "Scholarly papers matching a query, with citations.",
         [QUERY, integer("since_year", "Only papers from this year on.", required=False,
                         minimum=1900, maximum=2030), LIMIT],
         {"papers": rows({"title": fmt("On {query}"), "first_author": person(),
                          "year": rint(2012, 2025), "citations": rint(0, 4000),
                          "doi": lambda d, a: f"10.5555/{d.hex(8)}"})}),
    tool("search_code", "Code snippets across repositories matching a query.",
         [QUERY, string("language", "Programming language.", required=False), LIMIT],
         {"matches": rows({"repository": lambda d, a: d.pick(("acme", "blueheron", "atlas"))
                           + "/" + d.sub("r").pick(("api", "web", "infra")),
                           "path": pick("src/client.py", "lib/retry.ts", "cmd/main.go"),
                           "line": rint(1, 400)})}),
    tool("search_products", "Products in the shop catalogue matching a query.",
         [QUERY, number("max_price", "Highest price.", required=False, minimum=0,
                        maximum=MAX_PAYMENT), LIMIT],
         {"products": rows({"sku": lambda d, a: f"SKU-{d.hex(6).upper()}",
                            "title": fmt("{query} - standard edition"),
                            "price": rnum(5, 300, 2), "rating": rnum(3, 5, 1)})}),
    tool("search_jobs", "Job postings matching a role and location.",
         [QUERY, string("location", "City or 'remote'.", required=False), LIMIT],
         {"jobs": rows({"title": fmt("{query}"), "company": company(),
                        "location": pick("Remote", "Lisbon", "Berlin", "Toronto"),
                        "posted_at": at_time(-14, 0)})}),
    tool("search_recipes", "Recipes matching ingredients or a dish name.",
         [QUERY, choice("diet", "Dietary filter.", ("any", "vegetarian", "vegan", "gluten_free"),
                        required=False, default="any"), LIMIT],
         {"recipes": rows({"title": fmt("Easy {query}"), "minutes": pick(15, 25, 40, 60),
                           "servings": rint(2, 6), "calories_per_serving": rint(250, 800)})}),
    tool("search_documentation", "Developer documentation pages matching a question.",
         [QUERY, string("product", "Limit to one product's docs.", required=False), LIMIT],
         {"pages": rows({"title": fmt("Guide: {query}"), "url": link("docs", "guide/"),
                         "section": pick("Getting started", "Reference", "How-to")})}),
    tool("search_internal_wiki", "Pages of the company wiki matching a query.",
         [QUERY, string("space", "Wiki space key.", required=False), LIMIT],
         {"pages": rows({"title": fmt("{query} (team notes)"), "author": person(),
                         "updated_at": at_time(-100, 0), "url": link("wiki", "p/")})}),
    tool("autocomplete_query", "Suggestions that complete a partial search query.",
         [string("prefix", "What the user typed so far.", example="how to expo")],
         {"suggestions": lambda d, a: [f"{a.get('prefix')}{tail}" for tail in
                                       ("rt data", "rt to csv", "se an api", "rt a pdf")]}),
    tool("get_trending_topics", "Topics trending now in a region.",
         [string("region", "ISO 3166 alpha-2 country.", pattern="^[A-Z]{2}$", example="PT")],
         {"region": echo("region"),
          "topics": each_of(("elections", "transfer window", "new phone launch", "heatwave",
                             "film festival"), {"volume": rint(5_000, 900_000)}, key="topic")}),
    tool("reindex_search_collection",
         "Rebuild the search index of a document collection; reports progress per batch.",
         [string("collection", "Collection to rebuild.", example="help-center"),
          integer("batches", "Number of batches to index in.", required=False, minimum=1,
                  maximum=20, default=4)],
         handler=reindex_search_collection, kind="execute"),
)

KNOWLEDGE_SPECS = group(
    "knowledge",
    tool("get_country_info", "Capital, currency, calling code, languages and region of a country.",
         [string("country_code", "ISO 3166 alpha-2 code.", pattern="^[A-Za-z]{2}$",
                 example="PT")],
         compute=country_info),
    tool("define_word", "Dictionary definitions of an English word.",
         [string("word", "Word to define.", example="serendipity")],
         {"word": echo("word"), "part_of_speech": pick("noun", "verb", "adjective"),
          "definitions": lambda d, a: [f"A meaning of '{a.get('word')}' in everyday use.",
                                       f"A technical sense of '{a.get('word')}'."]},
         kind="read"),
    tool("get_synonyms", "Synonyms and antonyms of an English word.",
         [string("word", "Word.", example="quick")],
         {"word": echo("word"), "synonyms": pick(["fast", "rapid", "swift"], ["brisk", "speedy"]),
          "antonyms": pick(["slow"], ["sluggish", "leisurely"])}),
    tool("get_encyclopedia_summary", "A short encyclopedia summary of a topic.",
         [string("topic", "Topic.", example="Photosynthesis")],
         {"topic": echo("topic"),
          "summary": fmt("{topic} is a well-documented subject; this example catalogue returns "
                         "a placeholder summary."),
          "url": link("encyclopedia", "wiki/")}),
    tool("get_public_holidays", "Public holidays of a country in a year.",
         [string("country_code", "ISO 3166 alpha-2 code.", pattern="^[A-Z]{2}$", example="PT"),
          integer("year", "Year.", minimum=2000, maximum=2100, example=2025)],
         compute=public_holidays),
)
# fmt: on


SPECS: tuple[Spec, ...] = SEARCH_SPECS + KNOWLEDGE_SPECS
