"""Money tools: payments (charges, refunds, invoices, subscriptions) and personal finance."""

from __future__ import annotations

import math
from datetime import timedelta

from prism_tools.examples._build import (
    COMPANIES,
    CURRENCY,
    LIMIT,
    MAX_AMOUNT,
    MAX_PAYMENT,
    REFERENCE_DAY,
    Args,
    Draw,
    Spec,
    at_time,
    boolean,
    choice,
    company,
    const,
    echo,
    email,
    group,
    ident,
    int_arg,
    integer,
    link,
    money,
    num_arg,
    number,
    numbers,
    on_day,
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

PAYMENT_ID = string("payment_id", "Payment id, e.g. 'pay_3LkA9'.", example="pay_3LkA9x")
CUSTOMER_ID = string("customer_id", "Billing customer id.", example="cus_N8a2Lq")
INVOICE_ID = string("invoice_id", "Invoice id.", example="in_1PqR7s")
SUBSCRIPTION_ID = string("subscription_id", "Subscription id.", example="sub_4fG1a")
AMOUNT = number("amount", "Amount in major units (e.g. 12.50).", exclusive_minimum=0,
                maximum=MAX_PAYMENT, example=49.0)  # fmt: skip
SYMBOL = string("symbol", "Ticker symbol, e.g. 'ACME'.", pattern="^[A-Z.]{1,6}$", example="ACME")

# A fixed rate table (units per US dollar) keeps conversions deterministic and offline.
USD_RATES = {
    "USD": 1.0, "EUR": 0.92, "GBP": 0.79, "JPY": 149.5, "CHF": 0.88, "CAD": 1.36, "AUD": 1.53,
    "NZD": 1.64, "SEK": 10.45, "NOK": 10.6, "DKK": 6.87, "PLN": 3.98, "CZK": 23.1, "BRL": 4.97,
    "MXN": 17.1, "ARS": 850.0, "INR": 83.0, "SGD": 1.34, "HKD": 7.82, "KRW": 1330.0,
    "AED": 3.67, "NGN": 1500.0, "KES": 145.0, "EGP": 30.9, "CNY": 7.19, "ZAR": 18.9,
}  # fmt: skip
ZERO_DECIMAL = frozenset(("JPY", "KRW"))


def _rate(code: object) -> float:
    key = str(code).upper()
    if key not in USD_RATES:
        supported = ", ".join(sorted(USD_RATES))
        raise ValueError(f"unsupported currency {code!r}; supported: {supported}")
    return USD_RATES[key]


def convert_currency(args: Args) -> JSONValue:
    amount = num_arg(args, "amount")
    source, target = str(args.get("from_currency")), str(args.get("to_currency"))
    rate = _rate(target) / _rate(source)
    digits = 0 if target.upper() in ZERO_DECIMAL else 2
    return {
        "amount": round(amount * rate, digits),
        "currency": target.upper(),
        "rate": round(rate, 6),
        "rate_date": REFERENCE_DAY.isoformat(),
    }


def exchange_rate(args: Args) -> JSONValue:
    base, quote = str(args.get("base")), str(args.get("quote"))
    return {"base": base, "quote": quote, "rate": round(_rate(quote) / _rate(base), 6)}


def loan_payment(args: Args) -> JSONValue:
    principal = num_arg(args, "principal")
    months = int_arg(args, "term_months")
    monthly_rate = num_arg(args, "annual_rate_percent") / 100 / 12
    # 1 - (1 + r) ** -n, computed so that a tiny rate does not round it to zero.
    discount = -math.expm1(-months * math.log1p(monthly_rate))
    if monthly_rate == 0 or discount <= 0:
        payment = principal / months
    else:
        payment = principal * monthly_rate / discount
    total = payment * months
    return {
        "monthly_payment": round(payment, 2),
        "total_paid": round(total, 2),
        "total_interest": round(total - principal, 2) + 0.0,  # never -0.0
    }


def amortization(args: Args) -> JSONValue:
    principal = num_arg(args, "principal")
    months = int_arg(args, "term_months")
    monthly_rate = num_arg(args, "annual_rate_percent") / 100 / 12
    payment = loan_payment(args)
    assert isinstance(payment, dict)
    monthly = float(payment["monthly_payment"])
    balance, schedule = principal, []
    for month in range(1, min(months, 24) + 1):
        interest = balance * monthly_rate
        balance = max(0.0, balance - (monthly - interest))
        schedule.append(
            {"month": month, "interest": round(interest, 2),
             "principal": round(monthly - interest, 2), "balance": round(balance, 2)}
        )  # fmt: skip
    return {"monthly_payment": monthly, "first_months": schedule}


def compound_interest(args: Args) -> JSONValue:
    principal = num_arg(args, "principal")
    rate = num_arg(args, "annual_rate_percent") / 100
    years = num_arg(args, "years")
    per_year = int_arg(args, "compounds_per_year")
    contribution = num_arg(args, "monthly_contribution")
    value = principal * (1 + rate / per_year) ** (per_year * years)
    # Monthly contributions, compounded monthly at the same nominal rate.
    monthly = rate / 12
    months = years * 12
    if contribution:
        # ((1 + m) ** n - 1) / m, exact enough for a tiny rate (where it tends to n).
        growth = math.expm1(months * math.log1p(monthly))
        value += (
            contribution * months if monthly == 0 or growth == 0
            else contribution * (growth / monthly)
        )  # fmt: skip
    invested = principal + contribution * months
    return {
        "future_value": round(value, 2),
        "total_contributed": round(invested, 2),
        "interest_earned": round(value - invested, 2),
    }


def roi(args: Args) -> JSONValue:
    cost, gain = num_arg(args, "cost"), num_arg(args, "final_value")
    if cost <= 0:
        raise ValueError("'cost' must be positive")
    years = args.get("years")
    result: dict[str, JSONValue] = {"roi_percent": round((gain - cost) / cost * 100, 2)}
    if isinstance(years, int | float) and years > 0 and gain > 0:
        # (gain / cost) ** (1 / years), in logs: a short period can make it overflow.
        exponent = math.log(gain / cost) / years
        if exponent > 700:
            raise ValueError(
                "the annualised return is too large to report: 'years' is too short for this "
                "gain; omit 'years' for the plain return"
            )
        result["annualized_percent"] = round(math.expm1(exponent) * 100, 2)
    return result


def npv(args: Args) -> JSONValue:
    rate = num_arg(args, "discount_rate_percent") / 100
    flows = _flows(args)
    value = sum(flow / (1 + rate) ** year for year, flow in enumerate(flows))
    return {"npv": round(value, 2), "periods": len(flows)}


def _flows(args: Args) -> list[float]:
    raw = args.get("cash_flows")
    if not isinstance(raw, list) or len(raw) < 2:
        raise ValueError("'cash_flows' needs at least two numbers (the first is usually negative)")
    return [float(flow) for flow in raw]


def irr(args: Args) -> JSONValue:
    flows = _flows(args)
    if not (min(flows) < 0 < max(flows)):
        raise ValueError("IRR needs both negative and positive cash flows")

    def value(rate: float) -> float:
        return sum(flow / (1 + rate) ** year for year, flow in enumerate(flows))

    def sign(rate: float) -> int:
        # Signs are multiplied rather than values, so large values cannot overflow the test.
        found = value(rate)
        return (found > 0) - (found < 0)

    # Bisection between -99% and +1000%: slow but never diverges.
    low, high = -0.99, 10.0
    if sign(low) * sign(high) > 0:
        raise ValueError("no IRR in the range -99%..1000% for these cash flows")
    for _ in range(200):
        mid = (low + high) / 2
        if sign(low) * sign(mid) <= 0:
            high = mid
        else:
            low = mid
    return {"irr_percent": round((low + high) / 2 * 100, 4)}


def break_even(args: Args) -> JSONValue:
    fixed = num_arg(args, "fixed_costs")
    price, variable = num_arg(args, "unit_price"), num_arg(args, "variable_cost_per_unit")
    margin = price - variable
    if margin <= 0:
        raise ValueError("the unit price must exceed the variable cost per unit")
    if fixed / margin > 1e15:
        raise ValueError("break-even is beyond 10^15 units: the margin per unit is too small")
    units = math.ceil(fixed / margin)
    return {"break_even_units": units, "break_even_revenue": round(units * price, 2),
            "contribution_margin": round(margin, 2)}  # fmt: skip


def depreciation(args: Args) -> JSONValue:
    cost, salvage = num_arg(args, "cost"), num_arg(args, "salvage_value")
    life = int_arg(args, "useful_life_years")
    method = args.get("method")
    book, table = cost, []
    for year in range(1, life + 1):
        if method == "double_declining":
            charge = min(book * 2 / life, max(0.0, book - salvage))
        else:
            charge = (cost - salvage) / life
        book -= charge
        table.append({"year": year, "depreciation": round(charge, 2), "book_value": round(book, 2)})
    return {"method": method, "schedule": table}


# Simplified progressive brackets (single filer); an illustration, not tax advice.
BRACKETS = ((11_600, 0.10), (47_150, 0.12), (100_525, 0.22), (191_950, 0.24), (243_725, 0.32),
            (609_350, 0.35), (math.inf, 0.37))  # fmt: skip


def tax_estimate(args: Args) -> JSONValue:
    income = num_arg(args, "annual_income")
    taxable = max(0.0, income - num_arg(args, "deductions"))
    tax, lower, marginal = 0.0, 0.0, 0.10
    for upper, rate in BRACKETS:
        if taxable > lower:
            tax += (min(taxable, upper) - lower) * rate
            marginal = rate
        lower = upper
    return {
        "taxable_income": round(taxable, 2),
        "estimated_tax": round(tax, 2),
        "effective_rate_percent": round(tax / income * 100, 2) if income else 0.0,
        "marginal_rate_percent": round(marginal * 100, 1),
        "note": "Simplified single-filer brackets; not tax advice.",
    }


def processing_fee(args: Args) -> JSONValue:
    amount = num_arg(args, "amount")
    pricing = {"card": (2.9, 0.30), "international_card": (4.4, 0.30),
               "bank_transfer": (0.8, 0.0), "wallet": (3.4, 0.0)}  # fmt: skip
    percent, fixed = pricing[str(args.get("method"))]
    fee = round(amount * percent / 100 + fixed, 2)
    return {"fee": fee, "net": round(amount - fee, 2), "percent": percent, "fixed": fixed}


def luhn_check(args: Args) -> JSONValue:
    digits = [int(ch) for ch in text_arg(args, "number") if ch.isdigit()]
    if len(digits) < 12:
        return {"valid": False, "reason": "too few digits"}
    total = 0
    for index, digit in enumerate(reversed(digits)):
        if index % 2:
            digit = digit * 2 - 9 if digit > 4 else digit * 2
        total += digit
    first = "".join(map(str, digits[:2]))
    brand = ("visa" if first[0] == "4" else "mastercard" if "51" <= first <= "55"
             else "amex" if first in ("34", "37") else "unknown")  # fmt: skip
    return {"valid": total % 10 == 0, "brand": brand, "last4": "".join(map(str, digits[-4:]))}


def split_bill(args: Args) -> JSONValue:
    total = num_arg(args, "total")
    people = int_arg(args, "people")
    tip = num_arg(args, "tip_percent")
    grand = round(total * (1 + tip / 100), 2)
    cents = round(grand * 100)
    share, extra = divmod(cents, people)
    # Spread leftover cents over the first payers so the shares add up exactly.
    shares = [(share + (1 if i < extra else 0)) / 100 for i in range(people)]
    return {"total_with_tip": grand, "tip": round(grand - total, 2), "shares": shares}


def price_history(args: Args) -> JSONValue:
    symbol = str(args.get("symbol"))
    days = args.get("days")
    count = days if isinstance(days, int) else 10
    draw = Draw.seeded("stock", symbol)
    price = draw.number(20, 600, 2)
    closes: list[float] = []
    for index in range(count):
        price = round(max(1.0, price * (1 + draw.sub(index).number(-0.03, 0.03, 4))), 2)
        closes.append(price)
    prices = [
        {"date": (REFERENCE_DAY - timedelta(days=count - 1 - index)).isoformat(), "close": close}
        for index, close in enumerate(closes)
    ]
    return {"symbol": symbol, "prices": prices, "high": max(closes), "low": min(closes)}


def quote(args: Args) -> JSONValue:
    symbol = str(args.get("symbol"))
    draw = Draw.seeded("stock", symbol)
    price = draw.number(20, 600, 2)
    change = draw.sub("chg").number(-4, 4, 2)
    return {
        "symbol": symbol,
        "price": price,
        "change_percent": change,
        "currency": "USD",
        "market_cap_billions": draw.sub("cap").number(1, 900, 1),
        "as_of": f"{REFERENCE_DAY.isoformat()}T21:00:00Z",
    }


def portfolio_value(args: Args) -> JSONValue:
    holdings = args.get("holdings")
    if not isinstance(holdings, list):
        raise ValueError("'holdings' must be a list")
    values: list[tuple[JSONValue, float]] = []
    for holding in holdings:
        if not isinstance(holding, dict):
            raise ValueError("each holding needs a symbol and shares")
        snapshot = quote({"symbol": holding.get("symbol")})
        assert isinstance(snapshot, dict)
        value = float(snapshot["price"]) * num_arg(holding, "shares")
        values.append((holding.get("symbol"), value))
    total = sum(value for _, value in values)
    positions = [
        {"symbol": symbol, "value": round(value, 2),
         "weight_percent": round(value / total * 100, 2) if total else 0.0}
        for symbol, value in values
    ]  # fmt: skip
    return {"total_value": round(total, 2), "currency": "USD", "positions": positions}


# fmt: off
PAYMENT_SPECS = group(
    "payments",
    tool("create_payment_intent", "Start a card payment for an amount; returns a client secret.",
         [AMOUNT, CURRENCY, CUSTOMER_ID,
          string("description", "Shown on the receipt.", required=False)],
         {"payment_id": ident("pay", 10), "status": const("requires_confirmation"),
          "amount": echo("amount"), "currency": echo("currency"),
          "client_secret": lambda d, a: f"pay_{d.hex(10)}_secret_{d.sub('s').hex(16)}"}),
    tool("capture_payment", "Capture an authorised payment (all of it or part).",
         [PAYMENT_ID, number("amount", "Amount to capture; omit for the full amount.",
                             required=False, exclusive_minimum=0, maximum=MAX_PAYMENT)],
         {"payment_id": echo("payment_id"), "status": const("succeeded"),
          "captured_at": at_time(0, 0)}),
    tool("refund_payment", "Refund a payment in full or in part.",
         [PAYMENT_ID, number("amount", "Amount to refund; omit for a full refund.",
                             required=False, exclusive_minimum=0, maximum=MAX_PAYMENT),
          choice("reason", "Reason.", ("duplicate", "fraudulent", "requested_by_customer"))],
         {"refund_id": ident("re", 10), "payment_id": echo("payment_id"),
          "status": pick("succeeded", "pending")}),
    tool("get_payment_status", "Status, amount and card details of a payment.",
         [PAYMENT_ID],
         {"payment_id": echo("payment_id"), "status": pick("succeeded", "processing",
                                                          "requires_action", "failed"),
          "amount": money(5, 900), "card": lambda d, a: {"brand": d.pick(("visa", "mastercard")),
                                                          "last4": f"{d.integer(0, 9999):04d}"}}),
    tool("list_transactions", "Recent balance transactions (charges, refunds, fees, payouts).",
         [choice("type", "Only this type.", ("charge", "refund", "fee", "payout"),
                 required=False), LIMIT],
         {"transactions": rows({"id": ident("txn", 10), "type": pick("charge", "refund", "fee"),
                                "amount": money(1, 800), "created_at": at_time(-14, 0)})}),
    tool("create_invoice", "Create a draft invoice for a customer with line items.",
         [CUSTOMER_ID, strings("line_items", "Descriptions of what is billed.",
                               example=["Consulting, 4 hours"]),
          AMOUNT, CURRENCY, integer("days_until_due", "Payment terms.", required=False,
                                    minimum=0, maximum=120, default=30)],
         {"invoice_id": ident("in", 6), "status": const("draft"), "amount_due": echo("amount"),
          "due_date": on_day(30, 30)}),
    tool("send_invoice", "Email an invoice to the customer.",
         [INVOICE_ID], {"invoice_id": echo("invoice_id"), "status": const("open"),
                        "hosted_url": link("pay", "i/")}),
    tool("void_invoice", "Void an open invoice so it can no longer be paid.",
         [INVOICE_ID], {"invoice_id": echo("invoice_id"), "status": const("void")}),
    tool("create_billing_customer", "Create a customer for billing.",
         [email("email", "Billing email."), string("name", "Customer or company name.",
                                                   example="Northwind Traders")],
         {"customer_id": ident("cus", 6), "email": echo("email")}),
    tool("create_subscription", "Subscribe a customer to a price plan.",
         [CUSTOMER_ID, string("plan", "Plan id.", example="plan_pro_monthly"),
          integer("trial_days", "Free trial length.", required=False, minimum=0, maximum=90)],
         {"subscription_id": ident("sub", 5), "status": pick("active", "trialing"),
          "current_period_end": on_day(30, 30)}),
    tool("cancel_subscription", "Cancel a subscription now or at the end of the period.",
         [SUBSCRIPTION_ID, boolean("at_period_end", "Keep access until the period ends.",
                                   default=True)],
         {"subscription_id": echo("subscription_id"),
          "status": lambda d, a: "active" if a.get("at_period_end") else "canceled",
          "cancel_at": on_day(1, 30)}),
    tool("change_subscription_plan", "Move a subscription to another plan, prorating charges.",
         [SUBSCRIPTION_ID, string("plan", "New plan id.", example="plan_team_annual")],
         {"subscription_id": echo("subscription_id"), "plan": echo("plan"),
          "proration": money(-50, 200)}),
    tool("get_account_balance", "Available and pending balance of the merchant account.",
         [CURRENCY], {"available": money(1000, 90_000), "pending": money(0, 20_000)}),
    tool("create_payout", "Send money from the merchant balance to the bank account.",
         [AMOUNT, CURRENCY],
         {"payout_id": ident("po", 10), "status": const("pending"), "arrival_date": on_day(1, 3)}),
    tool("list_disputes", "Chargebacks that need a response.",
         [LIMIT], {"disputes": rows({"dispute_id": ident("dp", 8), "amount": money(10, 600),
                                     "reason": pick("fraudulent", "product_not_received",
                                                    "duplicate"),
                                     "respond_by": on_day(2, 14)})}),
    tool("submit_dispute_evidence", "Send evidence for a dispute.",
         [string("dispute_id", "Dispute id.", example="dp_81f0a2c3"),
          string("explanation", "What happened.", example="Item delivered, signed by customer."),
          strings("documents", "Evidence file paths.", required=False, min_items=0)],
         {"dispute_id": echo("dispute_id"), "status": const("under_review")}),
    tool("calculate_processing_fee", "Payment processing fee and net amount for a payment method.",
         [AMOUNT, choice("method", "Payment method.", ("card", "international_card",
                                                      "bank_transfer", "wallet"))],
         compute=processing_fee),
    tool("validate_card_number", "Check a card number with the Luhn checksum and detect the brand.",
         [string("number", "Card number; spaces allowed.", example="4242 4242 4242 4242")],
         compute=luhn_check),
    tool("split_bill", "Split a bill with tip among people, to the cent.",
         [number("total", "Bill total before tip.", minimum=0, maximum=MAX_PAYMENT,
                 example=86.4),
          integer("people", "Number of people.", minimum=1, maximum=100, example=3),
          number("tip_percent", "Tip percentage.", required=False, minimum=0, maximum=100,
                 default=0)],
         compute=split_bill),
)

FINANCE_SPECS = group(
    "finance",
    tool("get_stock_quote", "Latest price, daily change and market cap for a ticker.",
         [SYMBOL], compute=quote, kind="fetch"),
    tool("get_stock_price_history", "Daily closing prices of a ticker for recent days.",
         [SYMBOL, integer("days", "How many trading days.", minimum=2, maximum=90, example=10)],
         compute=price_history, kind="fetch"),
    tool("get_company_financials", "Revenue, net income, margins and EPS for a fiscal year.",
         [SYMBOL, integer("fiscal_year", "Fiscal year.", minimum=2000, maximum=2030,
                          example=2024)],
         {"symbol": echo("symbol"), "fiscal_year": echo("fiscal_year"),
          "revenue_millions": rint(500, 90_000), "net_margin_percent": rnum(-5, 35, 1),
          "eps": rnum(-1, 14, 2), "debt_to_equity": rnum(0.1, 2.5, 2)}, kind="fetch"),
    tool("get_exchange_rate", "Exchange rate between two currencies.",
         [string("base", "Currency to convert from.", pattern="^[A-Z]{3}$", example="EUR"),
          string("quote", "Currency to convert to.", pattern="^[A-Z]{3}$", example="USD")],
         compute=exchange_rate, kind="fetch"),
    tool("convert_currency", "Convert an amount between currencies at today's reference rate.",
         [number("amount", "Amount to convert.", minimum=0, maximum=MAX_AMOUNT, example=250),
          string("from_currency", "Source currency.", pattern="^[A-Z]{3}$", example="EUR"),
          string("to_currency", "Target currency.", pattern="^[A-Z]{3}$", example="JPY")],
         compute=convert_currency),
    tool("get_crypto_price", "Spot price and 24h change of a cryptocurrency.",
         [string("coin", "Coin ticker.", example="BTC"), CURRENCY],
         {"coin": echo("coin"), "price": money(0.05, 90_000), "change_24h_percent": rnum(-9, 9)},
         kind="fetch"),
    tool("get_market_news", "Recent market headlines, optionally about one ticker.",
         [string("symbol", "Only news about this ticker.", required=False), LIMIT],
         {"articles": rows({"headline": lambda d, a: d.pick((
                                "{} shares move after quarterly update",
                                "Analysts revisit outlook for {}",
                                "{} announces buyback programme")).format(
                                    a.get("symbol") or d.sub("c").pick(COMPANIES)),
                            "source": pick("Market Wire", "Daily Ledger", "Finance Desk"),
                            "published_at": at_time(-3, 0), "url": link("news", "a/")})},
         kind="fetch"),
    tool("get_portfolio_value", "Market value and weights of a set of holdings.",
         [records("holdings", "Positions held.",
                  [SYMBOL, number("shares", "Number of shares.", exclusive_minimum=0,
                                  maximum=1_000_000_000, example=10)])],
         compute=portfolio_value),
    tool("place_stock_order", "Place a buy or sell order for shares.",
         [SYMBOL, choice("side", "Buy or sell.", ("buy", "sell")),
          integer("quantity", "Shares.", minimum=1, maximum=1_000_000_000, example=10),
          choice("order_type", "Order type.", ("market", "limit")),
          number("limit_price", "Limit price for limit orders.", required=False,
                 exclusive_minimum=0, maximum=MAX_PAYMENT)],
         {"order_id": ident("ord", 10), "status": const("accepted"), "symbol": echo("symbol"),
          "side": echo("side"), "quantity": echo("quantity")}),
    tool("cancel_stock_order", "Cancel an open stock order.",
         [string("order_id", "Order id.", example="ord_8c2f11a9e0")],
         {"order_id": echo("order_id"), "status": const("cancelled")}),
    tool("get_bond_yield", "Government bond yield for a country and maturity.",
         [string("country", "ISO 3166 alpha-2 country.", pattern="^[A-Z]{2}$", example="US"),
          choice("maturity", "Maturity.", ("3m", "2y", "5y", "10y", "30y"))],
         {"country": echo("country"), "maturity": echo("maturity"), "yield_percent": rnum(0.5, 6)},
         kind="fetch"),
    tool("calculate_loan_payment", "Monthly payment, total paid and interest of a loan.",
         [number("principal", "Amount borrowed.", exclusive_minimum=0, maximum=MAX_AMOUNT,
                 example=250000),
          number("annual_rate_percent", "Nominal annual interest rate.", minimum=0, maximum=100,
                 example=4.5),
          integer("term_months", "Loan length in months.", minimum=1, maximum=600, example=360)],
         compute=loan_payment),
    tool("get_amortization_schedule", "Interest/principal split of the first payments of a loan.",
         [number("principal", "Amount borrowed.", exclusive_minimum=0, maximum=MAX_AMOUNT,
                 example=20000),
          number("annual_rate_percent", "Nominal annual rate.", minimum=0, maximum=100,
                 example=6),
          integer("term_months", "Loan length in months.", minimum=1, maximum=600, example=48)],
         compute=amortization, kind="think"),
    tool("calculate_compound_interest", "Future value of savings with compounding and deposits.",
         [number("principal", "Starting amount.", minimum=0, maximum=MAX_AMOUNT, example=10000),
          number("annual_rate_percent", "Annual rate.", minimum=0, maximum=100, example=5),
          number("years", "Years invested.", exclusive_minimum=0, maximum=100, example=10),
          integer("compounds_per_year", "Compounding periods a year.", required=False,
                  minimum=1, maximum=365, default=12),
          number("monthly_contribution", "Deposit each month.", required=False, minimum=0,
                 maximum=MAX_AMOUNT, default=0)],
         compute=compound_interest),
    tool("calculate_roi", "Return on investment, and its annualised rate when years are given.",
         [number("cost", "Amount invested.", minimum=0.01, maximum=MAX_AMOUNT, example=1000),
          number("final_value", "Value at the end.", minimum=0, maximum=MAX_AMOUNT,
                 example=1450),
          number("years", "Holding period.", required=False, exclusive_minimum=0,
                 maximum=100)],
         compute=roi),
    tool("calculate_npv", "Net present value of yearly cash flows at a discount rate.",
         [numbers("cash_flows", "Cash flows by year, starting with year 0.", min_items=2,
                  max_items=100, minimum=-MAX_AMOUNT, maximum=MAX_AMOUNT,
                  example=[-1000, 300, 400, 500]),
          number("discount_rate_percent", "Discount rate.", minimum=-99, maximum=100, example=8)],
         compute=npv),
    tool("calculate_irr", "Internal rate of return of yearly cash flows.",
         [numbers("cash_flows", "Cash flows by year, starting with year 0.", min_items=2,
                  max_items=100, minimum=-MAX_AMOUNT, maximum=MAX_AMOUNT,
                  example=[-1000, 300, 400, 500])],
         compute=irr),
    tool("calculate_break_even", "Units and revenue needed to cover fixed costs.",
         [number("fixed_costs", "Fixed costs for the period.", minimum=0, maximum=MAX_AMOUNT,
                 example=12000),
          number("unit_price", "Selling price per unit.", exclusive_minimum=0,
                 maximum=MAX_AMOUNT, example=25),
          number("variable_cost_per_unit", "Variable cost per unit.", minimum=0,
                 maximum=MAX_AMOUNT, example=10)],
         compute=break_even),
    tool("calculate_depreciation", "Yearly depreciation schedule of an asset.",
         [number("cost", "Purchase cost.", exclusive_minimum=0, maximum=MAX_AMOUNT,
                 example=12000),
          number("salvage_value", "Value at the end of its life.", minimum=0,
                 maximum=MAX_AMOUNT, example=2000),
          integer("useful_life_years", "Useful life.", minimum=1, maximum=50, example=5),
          choice("method", "Method.", ("straight_line", "double_declining"), required=False,
                 default="straight_line")],
         compute=depreciation),
    tool("estimate_income_tax", "Rough income tax from simplified progressive brackets.",
         [number("annual_income", "Gross yearly income.", minimum=0, maximum=MAX_AMOUNT,
                 example=85000),
          number("deductions", "Total deductions.", required=False, minimum=0,
                 maximum=MAX_AMOUNT, default=14600)],
         compute=tax_estimate, kind="think"),
    tool("get_budget_summary", "Spending per budget category this month against the limits.",
         [string("month", "Month as YYYY-MM.", pattern="^[0-9]{4}-[0-9]{2}$", example="2025-02"),
          CURRENCY],
         {"month": echo("month"),
          "categories": lambda d, a: [
              {"category": name, "spent": round(d.sub(name).number(0.3, 1.2, 3) * limit, 2),
               "limit": limit} for name, limit in (("groceries", 600), ("dining", 250),
                                                  ("transport", 200), ("utilities", 300),
                                                  ("entertainment", 150))]}),
    tool("list_bank_transactions", "Recent transactions on a bank account, with categories.",
         [string("account_id", "Bank account id.", example="acct_chk_01"), LIMIT],
         {"transactions": rows({"date": on_day(-20, 0), "merchant": company(),
                                "amount": money(-400, -3), "category": pick(
                                    "groceries", "dining", "transport", "utilities", "shopping"),
                                "memo": title()})}),
)
# fmt: on

SPECS: tuple[Spec, ...] = PAYMENT_SPECS + FINANCE_SPECS
