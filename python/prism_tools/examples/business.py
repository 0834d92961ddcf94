"""Business tools: CRM, customer support and online shop operations."""

from __future__ import annotations

from prism_tools.examples._build import (
    CURRENCY,
    LIMIT,
    MAX_AMOUNT,
    MAX_PAYMENT,
    QUERY,
    Args,
    Draw,
    Spec,
    at_time,
    boolean,
    chance,
    choice,
    company,
    const,
    contact,
    each_of,
    echo,
    email,
    fmt,
    from_list,
    group,
    ident,
    int_arg,
    integer,
    link,
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
    text_arg,
    title,
    tool,
)
from prism_tools.types import JSONValue

CONTACT_ID = string("contact_id", "CRM contact id, e.g. 'con_5a1f02'.", example="con_5a1f02")
DEAL_ID = string("deal_id", "Deal id, e.g. 'deal_88e1a0'.", example="deal_88e1a0")
ACCOUNT_ID = string("account_id", "Account (company) id.", example="acc_19c2d7")
TICKET_ID = string("ticket_id", "Support ticket id, e.g. 'T-20931'.", example="T-20931")
ORDER_ID = string("order_id", "Order number, e.g. 'ORD-100482'.", example="ORD-100482")
SKU = string("sku", "Product SKU.", example="SKU-TEE-BLK-M")
STAGES = ("prospecting", "qualification", "proposal", "negotiation", "closed_won", "closed_lost")
PRIORITIES = ("low", "normal", "high", "urgent")

# Win probability by stage, used to weight the pipeline forecast.
STAGE_WEIGHTS = {"prospecting": 0.1, "qualification": 0.2, "proposal": 0.4, "negotiation": 0.7,
                 "closed_won": 1.0, "closed_lost": 0.0}  # fmt: skip


def forecast_pipeline(args: Args) -> JSONValue:
    draw = Draw.seeded("pipeline", args.get("owner"), args.get("quarter"))
    stages: dict[str, JSONValue] = {}
    weighted = 0.0
    for stage, weight in STAGE_WEIGHTS.items():
        amount = draw.sub(stage).integer(20, 400) * 1000
        weighted += amount * weight
        stages[stage] = {"deals": draw.sub(stage + "n").integer(1, 25), "amount": amount}
    return {
        "quarter": args.get("quarter"),
        "by_stage": stages,
        "weighted_forecast": round(weighted, 2),
        "currency": args.get("currency"),
    }


def score_lead(args: Args) -> JSONValue:
    # A transparent points model so a model can explain the score back to the user.
    points = 0
    reasons: list[str] = []
    size = int_arg(args, "company_size")
    if size >= 1000:
        points, reasons = points + 30, [*reasons, "enterprise company size"]
    elif size >= 100:
        points, reasons = points + 20, [*reasons, "mid-market company size"]
    else:
        points, reasons = points + 5, [*reasons, "small company"]
    budget = num_arg(args, "budget")
    if budget >= 50_000:
        points, reasons = points + 30, [*reasons, "budget above 50k"]
    elif budget >= 10_000:
        points, reasons = points + 15, [*reasons, "budget above 10k"]
    visits = int_arg(args, "website_visits")
    points += min(visits, 20)
    if visits >= 10:
        reasons.append("high website engagement")
    if args.get("requested_demo"):
        points, reasons = points + 20, [*reasons, "requested a demo"]
    grade = "A" if points >= 75 else "B" if points >= 50 else "C" if points >= 25 else "D"
    return {"score": min(points, 100), "grade": grade, "reasons": reasons}


def order_total(args: Args) -> JSONValue:
    lines = args.get("items")
    if not isinstance(lines, list) or not lines:
        raise ValueError("'items' must be a non-empty list")
    subtotal = 0.0
    for line in lines:
        if not isinstance(line, dict):
            raise ValueError("every item must be an object with unit_price and quantity")
        subtotal += num_arg(line, "unit_price") * int_arg(line, "quantity")
    discount = subtotal * num_arg(args, "discount_percent") / 100
    shipping = num_arg(args, "shipping")
    tax = (subtotal - discount) * num_arg(args, "tax_rate_percent") / 100
    total = subtotal - discount + shipping + tax
    return {
        "subtotal": round(subtotal, 2),
        "discount": round(discount, 2),
        "shipping": round(shipping, 2),
        "tax": round(tax, 2),
        "total": round(total, 2),
    }


PARTNER_KEY_PREFIX = "ptn_live_"


def sync_partner_inventory(args: Args) -> JSONValue:
    """Pull stock levels from a partner warehouse.

    The partner API only accepts live partner keys; anything else is refused the way such APIs
    do, by echoing the key back in the error. The demo uses this to show secret scrubbing.
    """
    partner = text_arg(args, "partner")
    api_key = text_arg(args, "api_key")
    if not api_key.startswith(PARTNER_KEY_PREFIX):
        raise PermissionError(
            f"partner {partner!r} rejected API key {api_key}: "
            f"inventory sync needs a live partner key (prefix {PARTNER_KEY_PREFIX!r})"
        )
    draw = Draw.seeded("partner-sync", partner)
    return {
        "partner": partner,
        "skus_updated": draw.sub("u").integer(20, 900),
        "skus_out_of_stock": draw.sub("o").integer(0, 25),
        "warehouse": draw.sub("w").pick(("Rotterdam DC", "Memphis DC", "Leipzig hub")),
    }


CONTACT_ROW = {"contact_id": ident("con", 6), "name": person(), "company": company(),
               "stage": pick("lead", "customer", "churned"),
               "last_activity": at_time(-40, 0)}  # fmt: skip
DEAL_ROW = {"deal_id": ident("deal", 6), "name": title(), "account": company(),
            "stage": pick(*STAGES[:4]), "amount": money(2_000, 250_000),
            "close_date": on_day(5, 90), "owner": person()}  # fmt: skip
TICKET_ROW = {"ticket_id": lambda d, a: f"T-{d.integer(10000, 99999)}", "subject": title(),
              "status": pick("open", "pending", "solved"), "priority": pick(*PRIORITIES),
              "requester": contact(), "updated_at": at_time(-10, 0)}  # fmt: skip
ORDER_ROW = {"order_id": lambda d, a: f"ORD-{d.integer(100000, 999999)}",
             "placed_at": at_time(-60, 0), "status": pick("processing", "shipped", "delivered"),
             "total": money(12, 640), "items": rint(1, 6)}  # fmt: skip

# fmt: off
CRM_SPECS = group(
    "crm",
    tool("create_contact", "Add a person to the CRM.",
         [string("name", "Full name.", example="Nadia Petrov"), email("email", "Email address."),
          string("company", "Company name.", required=False),
          string("phone", "Phone number.", required=False),
          choice("stage", "Lifecycle stage.", ("lead", "customer", "partner"), required=False,
                 default="lead")],
         {"contact_id": ident("con", 6), "name": echo("name"), "stage": echo("stage")}),
    tool("get_contact", "A CRM contact with company, owner and recent activity.",
         [CONTACT_ID],
         {"contact_id": echo("contact_id"), "name": person(), "company": company(),
          "owner": person(), "lifetime_value": money(0, 90_000),
          "recent_activity": rows({"type": pick("email", "call", "meeting"),
                                   "at": at_time(-30, 0), "summary": title()},
                                  count_arg="none", default=3)}),
    tool("update_contact", "Change a contact's details.",
         [CONTACT_ID, email("email", "New email.", required=False),
          string("phone", "New phone number.", required=False),
          string("title", "Job title.", required=False),
          choice("stage", "Lifecycle stage.", ("lead", "customer", "partner", "churned"),
                 required=False)],
         {"contact_id": echo("contact_id"), "updated": const(True)}),
    tool("search_contacts", "Find contacts by name, email or company.",
         [QUERY, LIMIT], {"query": echo("query"), "contacts": rows(CONTACT_ROW)}),
    tool("delete_contact", "Remove a contact from the CRM (kept in the recycle bin 14 days).",
         [CONTACT_ID], {"contact_id": echo("contact_id"), "deleted": const(True)}),
    tool("merge_contacts", "Merge a duplicate contact into a primary one.",
         [string("primary_contact_id", "Contact to keep.", example="con_5a1f02"),
          string("duplicate_contact_id", "Contact to fold in.", example="con_5a1f03")],
         {"contact_id": echo("primary_contact_id"), "merged": echo("duplicate_contact_id"),
          "activities_moved": rint(0, 40)}),
    tool("create_deal", "Open a sales opportunity for an account.",
         [ACCOUNT_ID, string("name", "Deal name.", example="Annual platform renewal"),
          number("amount", "Expected value.", minimum=0, maximum=MAX_AMOUNT, example=48000),
          CURRENCY,
          string("close_date", "Expected close date.", fmt="date", example="2025-06-30")],
         {"deal_id": ident("deal", 6), "stage": const("prospecting"), "name": echo("name"),
          "amount": echo("amount"), "currency": echo("currency")}),
    tool("update_deal_stage", "Move a deal to another pipeline stage.",
         [DEAL_ID, choice("stage", "New stage.", STAGES),
          string("note", "Why it moved.", required=False)],
         {"deal_id": echo("deal_id"), "stage": echo("stage"),
          "win_probability": lambda d, a: STAGE_WEIGHTS.get(str(a.get("stage")), 0.0)}),
    tool("list_deals", "Open deals, optionally for one owner or stage.",
         [email("owner", "Deal owner.", required=False),
          choice("stage", "Only this stage.", STAGES, required=False), LIMIT],
         {"deals": rows(DEAL_ROW)}),
    tool("forecast_pipeline", "Pipeline by stage and a probability-weighted forecast.",
         [string("quarter", "Quarter as YYYY-Qn.", pattern="^[0-9]{4}-Q[1-4]$", example="2025-Q2"),
          email("owner", "Only this owner's deals.", required=False), CURRENCY],
         compute=forecast_pipeline, kind="think"),
    tool("log_call", "Record a phone call with a contact.",
         [CONTACT_ID, integer("duration_minutes", "Call length.", minimum=1, maximum=600,
                              example=15),
          string("summary", "What was discussed.", example="Discussed renewal timeline."),
          choice("outcome", "Result of the call.", ("connected", "voicemail", "no_answer"))],
         {"activity_id": ident("act", 8), "contact_id": echo("contact_id"),
          "logged": const(True)}),
    tool("log_meeting_note", "Attach meeting notes to a contact or deal.",
         [string("record_id", "Contact or deal id.", example="deal_88e1a0"),
          string("notes", "Meeting notes.", example="Agreed on pilot scope.")],
         {"note_id": ident("note", 8), "record_id": echo("record_id")}),
    tool("assign_account_owner", "Give an account a new owner.",
         [ACCOUNT_ID, email("owner", "New owner.")],
         {"account_id": echo("account_id"), "owner": echo("owner")}),
    tool("get_account_health", "Health score of an account from usage, support and billing.",
         [ACCOUNT_ID],
         {"account_id": echo("account_id"), "score": rint(20, 98),
          "trend": pick("improving", "stable", "declining"),
          "signals": each_of(("product_usage", "support_tickets", "billing", "engagement"),
                             {"status": pick("good", "watch", "risk")}, key="signal")}),
    tool("list_account_activities", "Recent emails, calls and meetings with an account.",
         [ACCOUNT_ID, LIMIT],
         {"activities": rows({"type": pick("email", "call", "meeting", "note"),
                              "by": person(), "at": at_time(-30, 0), "summary": title()})}),
    tool("score_lead", "Score a lead 0-100 with the reasons, from firmographics and engagement.",
         [integer("company_size", "Number of employees.", minimum=1, maximum=10_000_000,
                  example=250),
          number("budget", "Stated budget.", minimum=0, maximum=MAX_AMOUNT, example=20000),
          integer("website_visits", "Visits in the last 30 days.", minimum=0,
                  maximum=10_000_000, example=12),
          boolean("requested_demo", "Whether they asked for a demo.")],
         compute=score_lead, kind="think"),
    tool("convert_lead", "Turn a qualified lead into a contact, account and deal.",
         [CONTACT_ID, boolean("create_deal", "Also open a deal.", default=True)],
         {"contact_id": echo("contact_id"), "account_id": ident("acc", 6),
          "deal_id": lambda d, a: f"deal_{d.hex(6)}" if a.get("create_deal") else None}),
    tool("list_renewals_due", "Accounts whose contract renews within the given number of days.",
         [integer("within_days", "Look-ahead window.", minimum=1, maximum=365, example=60)],
         {"renewals": rows({"account": company(), "renews_on": on_day(1, 60),
                            "annual_value": money(5_000, 300_000), "owner": person()},
                           count_arg="none", default=4)}),
)

SUPPORT_SPECS = group(
    "support",
    tool("create_support_ticket", "Open a support ticket on behalf of a customer.",
         [email("requester", "Customer email."),
          string("subject", "Short summary.", example="Cannot download invoice"),
          string("description", "What happened.", example="The download button spins forever."),
          choice("priority", "Priority.", PRIORITIES, required=False, default="normal")],
         {"ticket_id": lambda d, a: f"T-{d.integer(10000, 99999)}", "status": const("open"),
          "priority": echo("priority"), "first_response_due": at_time(0, 1)}),
    tool("get_support_ticket", "A ticket with its conversation and status.",
         [TICKET_ID],
         {"ticket_id": echo("ticket_id"), "subject": title(), "status": pick("open", "pending"),
          "priority": pick(*PRIORITIES), "requester": contact(), "assignee": person(),
          "messages": rows({"from": pick("customer", "agent"), "at": at_time(-4, 0),
                            "text": fmt("Following up on ticket {ticket_id}.")},
                           count_arg="none", default=3)}),
    tool("list_support_tickets", "Tickets in a view, newest first.",
         [choice("status", "Only this status.", ("open", "pending", "solved", "closed"),
                 required=False),
          email("assignee", "Only this agent's tickets.", required=False), LIMIT],
         {"tickets": rows(TICKET_ROW)}),
    tool("reply_to_ticket", "Send a reply to the customer on a ticket.",
         [TICKET_ID, string("body", "Reply text.", example="Thanks, we are looking into it."),
          boolean("internal_note", "Post as an internal note instead.")],
         {"ticket_id": echo("ticket_id"), "comment_id": ident("cmt", 8),
          "public": lambda d, a: not a.get("internal_note")}),
    tool("assign_ticket", "Assign a ticket to an agent or group.",
         [TICKET_ID, string("assignee", "Agent email or group name.", example="billing-team")],
         {"ticket_id": echo("ticket_id"), "assignee": echo("assignee")}),
    tool("update_ticket_priority", "Change a ticket's priority.",
         [TICKET_ID, choice("priority", "New priority.", PRIORITIES)],
         {"ticket_id": echo("ticket_id"), "priority": echo("priority")}),
    tool("close_ticket", "Mark a ticket solved.",
         [TICKET_ID, string("resolution", "How it was solved.", example="Cache cleared.")],
         {"ticket_id": echo("ticket_id"), "status": const("solved")}),
    tool("escalate_ticket", "Escalate a ticket to the next support tier.",
         [TICKET_ID, choice("tier", "Tier to escalate to.", ("tier2", "tier3", "engineering")),
          string("reason", "Why.", example="Reproducible data loss.")],
         {"ticket_id": echo("ticket_id"), "tier": echo("tier"), "escalation_id": ident("esc", 8)}),
    tool("merge_tickets", "Merge duplicate tickets into one.",
         [TICKET_ID, strings("duplicate_ticket_ids", "Tickets to fold in.", example=["T-20932"])],
         {"ticket_id": echo("ticket_id"), "merged": echo("duplicate_ticket_ids")}),
    tool("tag_ticket", "Add tags to a ticket for reporting.",
         [TICKET_ID, strings("tags", "Tags to add.", example=["billing", "invoice"])],
         {"ticket_id": echo("ticket_id"), "tags": echo("tags")}),
    tool("search_knowledge_base", "Help-centre articles matching a question, best first.",
         [QUERY, LIMIT],
         {"articles": rows({"article_id": ident("kb", 6), "title": fmt("How to: {query}"),
                            "url": link("help", "articles/"),
                            "relevance": rnum(0.4, 0.99, 2)})}),
    tool("get_csat_summary", "Customer satisfaction results for a period.",
         [string("period", "Month as YYYY-MM.", pattern="^[0-9]{4}-[0-9]{2}$", example="2025-02")],
         {"period": echo("period"), "responses": rint(80, 900), "csat_percent": rnum(72, 97, 1),
          "top_complaint": pick("slow replies", "billing confusion", "missing feature")}),
)

COMMERCE_SPECS = group(
    "commerce",
    tool("get_order_status", "Status, items and delivery estimate of an order.",
         [ORDER_ID],
         {"order_id": echo("order_id"), "status": pick("processing", "shipped", "delivered"),
          "placed_at": at_time(-10, -1), "estimated_delivery": on_day(1, 6),
          "carrier": pick("DHL", "UPS", "PostNL", "FedEx"), "total": money(12, 640)}),
    tool("list_customer_orders", "A customer's orders, newest first.",
         [email("customer_email", "Customer email."), LIMIT],
         {"customer": echo("customer_email"), "orders": rows(ORDER_ROW)}),
    tool("cancel_order", "Cancel an order that has not shipped.",
         [ORDER_ID, choice("reason", "Reason.", ("customer_request", "fraud_suspected",
                                                 "out_of_stock", "other"))],
         {"order_id": echo("order_id"), "status": const("cancelled"), "refund_id": ident("re")}),
    tool("create_return", "Start a return for items of a delivered order.",
         [ORDER_ID, strings("skus", "Items to return.", example=["SKU-TEE-BLK-M"]),
          choice("reason", "Reason.", ("wrong_size", "damaged", "not_as_described",
                                       "changed_mind"))],
         {"return_id": ident("rma", 8), "order_id": echo("order_id"),
          "label_url": link("returns", "labels/"), "refund_estimate": money(10, 300)}),
    tool("track_shipment", "Tracking events of a parcel.",
         [string("tracking_number", "Carrier tracking number.", example="1Z999AA10123456784")],
         {"tracking_number": echo("tracking_number"),
          "status": pick("in_transit", "out_for_delivery", "delivered"),
          "events": rows({"at": at_time(-4, 0), "location": pick("Rotterdam", "Cologne",
                                                                  "Brussels", "Lille"),
                          "description": pick("Departed facility", "Arrived at hub",
                                              "Customs cleared", "With courier")},
                         count_arg="none", default=4)}),
    tool("get_product_details", "Title, price, stock and attributes of a product.",
         [SKU],
         {"sku": echo("sku"), "title": pick("Organic cotton tee", "Trail running shoe",
                                           "Ceramic pour-over set", "Merino beanie"),
          "price": money(9, 180), "in_stock": rint(0, 400), "rating": rnum(3.1, 4.9, 1)}),
    tool("check_inventory", "Stock on hand per warehouse for some SKUs.",
         [strings("skus", "SKUs to check.", max_items=50, example=["SKU-TEE-BLK-M"])],
         {"inventory": from_list("skus", {"on_hand": rint(0, 500), "reserved": rint(0, 40),
                                          "warehouse": pick("Rotterdam DC", "Memphis DC")},
                                 key="sku")}),
    tool("update_inventory", "Set or adjust the stock count of a SKU in a warehouse.",
         [SKU, integer("delta", "Units to add (negative removes).", minimum=-10000,
                       maximum=10000, example=25),
          string("warehouse", "Warehouse name.", example="Rotterdam DC")],
         {"sku": echo("sku"), "new_on_hand": rint(0, 600), "warehouse": echo("warehouse")}),
    tool("add_to_cart", "Add a product to a shopping cart.",
         [string("cart_id", "Cart id.", example="cart_7781"), SKU,
          integer("quantity", "Units.", minimum=1, maximum=99, example=1)],
         {"cart_id": echo("cart_id"), "items": rint(1, 6), "subtotal": money(10, 400)}),
    tool("apply_coupon", "Apply a coupon code to a cart.",
         [string("cart_id", "Cart id.", example="cart_7781"),
          string("code", "Coupon code.", pattern="^[A-Z0-9-]{3,20}$", example="SPRING15")],
         {"cart_id": echo("cart_id"), "code": echo("code"), "valid": chance(0.8),
          "discount_percent": pick(5, 10, 15, 20)}),
    tool("get_shipping_rates", "Shipping options and prices for a parcel to a destination.",
         [string("destination_country", "ISO 3166 alpha-2 country.", pattern="^[A-Z]{2}$",
                 example="DE"),
          number("weight_kg", "Parcel weight.", exclusive_minimum=0, maximum=70, example=1.2)],
         {"options": each_of(("standard", "express", "next_day"),
                             {"price": money(4, 40), "days": rint(1, 7)}, key="service")}),
    tool("create_shipping_label", "Buy a shipping label for an order.",
         [ORDER_ID, choice("service", "Service level.", ("standard", "express", "next_day"))],
         {"order_id": echo("order_id"), "tracking_number": lambda d, a: f"1Z{d.hex(16).upper()}",
          "label_url": link("labels", "pdf/"), "cost": money(4, 40)}),
    tool("list_product_reviews", "Customer reviews of a product.",
         [SKU, integer("min_rating", "Only reviews with at least this many stars.",
                       required=False, minimum=1, maximum=5), LIMIT],
         {"sku": echo("sku"), "reviews": rows({"rating": rint(1, 5), "author": person(),
                                               "title": pick("Great fit", "Runs small",
                                                             "Fast delivery", "Good value"),
                                               "posted_at": at_time(-120, 0)})}),
    tool("calculate_order_total", "Subtotal, discount, shipping, tax and total of an order.",
         [records("items", "Order lines.", [
              number("unit_price", "Price per unit.", minimum=0, maximum=MAX_PAYMENT,
                     example=19.99),
              integer("quantity", "Units.", minimum=1, maximum=1_000_000, example=2)]),
          number("discount_percent", "Discount on the subtotal.", required=False, minimum=0,
                 maximum=100, default=0),
          number("shipping", "Shipping charge.", required=False, minimum=0,
                 maximum=MAX_PAYMENT, default=0),
          number("tax_rate_percent", "Sales tax rate.", required=False, minimum=0, maximum=50,
                 default=0)],
         compute=order_total, kind="think"),
    tool("sync_partner_inventory",
         "Pull stock levels from a partner warehouse using the partner's API key.",
         [string("partner", "Partner name.", example="Harbor Supply Co"),
          string("api_key", "Partner API key (starts with 'ptn_live_').",
                 example="ptn_live_0000example")],
         compute=sync_partner_inventory, kind="fetch"),
    tool("create_discount_code", "Create a coupon code with a percentage off and an expiry.",
         [string("code", "Code customers type.", pattern="^[A-Z0-9-]{3,20}$", example="VIP20"),
          integer("percent_off", "Percentage off.", minimum=1, maximum=90, example=20),
          string("expires_on", "Last valid day.", fmt="date", example="2025-06-30"),
          integer("max_uses", "Total redemptions allowed.", required=False, minimum=1,
                  maximum=10_000_000)],
         {"code": echo("code"), "discount_id": ident("dsc", 8), "active": const(True)}),
    tool("get_sales_report", "Revenue, orders and average order value for a date range.",
         [string("start_date", "First day.", fmt="date", example="2025-02-01"),
          string("end_date", "Last day.", fmt="date", example="2025-02-28"), CURRENCY],
         {"revenue": money(20_000, 400_000), "orders": rint(300, 6000),
          "average_order_value": money(25, 120), "refund_rate_percent": rnum(0.5, 6, 1),
          "top_product": pick("Organic cotton tee", "Merino beanie", "Trail running shoe")}),
)
# fmt: on

SPECS: tuple[Spec, ...] = CRM_SPECS + SUPPORT_SPECS + COMMERCE_SPECS
