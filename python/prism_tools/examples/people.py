"""HR tools: employees, time off, expenses, payroll, hiring and onboarding."""

from __future__ import annotations

import calendar
from datetime import date

from prism_tools.examples._build import (
    CURRENCY,
    LIMIT,
    MAX_AMOUNT,
    MAX_PAYMENT,
    Args,
    Draw,
    Spec,
    at_time,
    boolean,
    check_day,
    choice,
    const,
    contact,
    count_weekdays,
    each_of,
    echo,
    email,
    group,
    ident,
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
    text_arg,
    tool,
)
from prism_tools.types import JSONValue

EMPLOYEE = email("employee", "Employee's work email.", example="lena.meyer@example.com")
DEPARTMENTS = ("engineering", "sales", "marketing", "finance", "people", "support", "design")
LEAVE_TYPES = ("vacation", "sick", "parental", "unpaid", "bereavement")


def _date(args: Args, name: str) -> date:
    try:
        when = date.fromisoformat(text_arg(args, name))
    except ValueError as err:
        raise ValueError(f"'{name}' must be YYYY-MM-DD") from err
    return check_day(when, name)


def prorated_salary(args: Args) -> JSONValue:
    annual = num_arg(args, "annual_salary")
    start, end = _date(args, "start_date"), _date(args, "end_date")
    if end < start:
        raise ValueError("'end_date' is before 'start_date'")
    # Prorate by calendar days within each month, the usual payroll convention.
    total, months = 0.0, []
    cursor = start
    while cursor <= end:
        days_in_month = calendar.monthrange(cursor.year, cursor.month)[1]
        month_end = date(cursor.year, cursor.month, days_in_month)
        last = min(month_end, end)
        worked = (last - cursor).days + 1
        amount = annual / 12 * worked / days_in_month
        months.append(
            {"month": cursor.strftime("%Y-%m"), "days": worked, "amount": round(amount, 2)}
        )
        total += amount
        cursor = date.fromordinal(month_end.toordinal() + 1)
    return {"total": round(total, 2), "currency": args.get("currency"), "months": months}


def time_off_days(args: Args) -> int:
    start, end = _date(args, "start_date"), _date(args, "end_date")
    if end < start:
        raise ValueError("'end_date' is before 'start_date'")
    return count_weekdays(start, (end - start).days + 1)


def request_time_off(args: Args) -> JSONValue:
    days = time_off_days(args)
    draw = Draw.seeded("leave", args.get("employee"), args.get("start_date"))
    return {
        "request_id": f"pto_{draw.hex(8)}",
        "employee": args.get("employee"),
        "type": args.get("leave_type"),
        "working_days": days,
        "status": "pending_approval",
        "approver": person()(draw.sub("mgr"), args),
    }


def overtime_pay(args: Args) -> JSONValue:
    hours = num_arg(args, "hours_worked")
    rate = num_arg(args, "hourly_rate")
    threshold = num_arg(args, "regular_hours")
    multiplier = num_arg(args, "overtime_multiplier")
    regular = min(hours, threshold)
    extra = max(0.0, hours - threshold)
    return {
        "regular_pay": round(regular * rate, 2),
        "overtime_hours": extra,
        "overtime_pay": round(extra * rate * multiplier, 2),
        "gross_pay": round(regular * rate + extra * rate * multiplier, 2),
    }


def payslip(args: Args) -> JSONValue:
    """A payslip whose deductions add up to gross minus net."""
    draw = Draw.seeded("payslip", args.get("employee"))
    gross = draw.integer(3000, 9000) * 1.0
    tax = round(gross * draw.sub("t").number(0.18, 0.32, 3), 2)
    social = round(gross * 0.11, 2)
    pension = round(gross * 0.05, 2)
    return {
        "employee": args.get("employee"),
        "month": args.get("month"),
        "gross": gross,
        "deductions": {"income_tax": tax, "social_security": social, "pension": pension},
        "net": round(gross - tax - social - pension, 2),
    }


# fmt: off
SPECS: tuple[Spec, ...] = group(
    "hr",
    tool("get_employee_profile", "Role, department, manager, location and start date.",
         [EMPLOYEE],
         {"employee": echo("employee"), "name": person(), "title": pick(
             "Software Engineer", "Account Executive", "Product Designer", "Financial Analyst"),
          "department": pick(*DEPARTMENTS), "manager": contact(),
          "location": pick("Lisbon", "Berlin", "Remote"), "start_date": on_day(-1500, -30)}),
    tool("list_department_employees", "People in a department.",
         [choice("department", "Department.", DEPARTMENTS), LIMIT],
         {"department": echo("department"), "employees": rows(contact())}),
    tool("get_org_chart", "Direct and indirect reports of a manager.",
         [EMPLOYEE, integer("depth", "Levels below to include.", required=False, minimum=1,
                            maximum=4, default=1)],
         {"manager": echo("employee"), "reports": rows({"person": contact(),
                                                        "reports": rint(0, 6)},
                                                       count_arg="none", default=4)}),
    tool("request_time_off", "File a leave request; returns the working days it covers.",
         [EMPLOYEE, choice("leave_type", "Kind of leave.", LEAVE_TYPES),
          string("start_date", "First day off.", fmt="date", example="2025-04-14"),
          string("end_date", "Last day off.", fmt="date", example="2025-04-18"),
          string("note", "Note for the approver.", required=False)],
         compute=request_time_off, kind="edit"),
    tool("approve_time_off", "Approve or reject a pending leave request.",
         [string("request_id", "Leave request id.", example="pto_1c2d3e4f"),
          choice("decision", "Decision.", ("approved", "rejected")),
          string("comment", "Comment to the employee.", required=False)],
         {"request_id": echo("request_id"), "status": echo("decision")}),
    tool("get_time_off_balance", "Remaining leave days by type for the current year.",
         [EMPLOYEE],
         {"employee": echo("employee"),
          "balances": each_of(("vacation", "sick", "personal"),
                              {"remaining_days": rnum(0, 25, 1), "used_days": rnum(0, 15, 1)},
                              key="type")}),
    tool("list_upcoming_time_off", "Who on a team is away in the coming weeks.",
         [string("team", "Team name.", example="payments"),
          integer("weeks", "How far ahead.", minimum=1, maximum=26, example=4)],
         {"absences": rows({"person": person(), "from": on_day(1, 20), "days": rint(1, 10),
                            "type": pick(*LEAVE_TYPES[:2])}, count_arg="none", default=3)}),
    tool("submit_expense_report", "Submit expenses for reimbursement.",
         [EMPLOYEE, records(
              "expenses", "Expense lines.",
              [string("description", "What it was.", example="Taxi to client"),
               number("amount", "Amount.", exclusive_minimum=0, maximum=MAX_PAYMENT,
                      example=23.5),
               choice("category", "Category.", ("travel", "meals", "lodging", "equipment",
                                                "other")),
               string("date", "Date incurred.", fmt="date", example="2025-03-10")]),
          CURRENCY],
         {"report_id": ident("exp", 8), "status": const("submitted"),
          "total": lambda d, a: round(sum(float(line.get("amount", 0))
                                          for line in a.get("expenses") or []
                                          if isinstance(line, dict)), 2)}),
    tool("approve_expense_report", "Approve or reject an expense report.",
         [string("report_id", "Expense report id.", example="exp_0a9b8c7d"),
          choice("decision", "Decision.", ("approved", "rejected"))],
         {"report_id": echo("report_id"), "status": echo("decision"),
          "payout_date": on_day(3, 10)}),
    tool("get_payslip", "Gross pay, deductions and net pay for a month.",
         [EMPLOYEE, string("month", "Month as YYYY-MM.", pattern="^[0-9]{4}-[0-9]{2}$",
                           example="2025-02")],
         compute=payslip),
    tool("list_open_positions", "Open job requisitions, optionally for one department.",
         [choice("department", "Department.", DEPARTMENTS, required=False), LIMIT],
         {"positions": rows({"requisition_id": ident("req", 6), "title": pick(
             "Senior Backend Engineer", "Sales Development Rep", "Data Analyst",
             "People Partner"), "location": pick("Lisbon", "Berlin", "Remote"),
             "applicants": rint(0, 240)})}),
    tool("create_job_posting", "Publish a job posting.",
         [string("title", "Job title.", example="Data Analyst"),
          choice("department", "Department.", DEPARTMENTS),
          string("location", "City or 'Remote'.", example="Remote"),
          string("description", "Role description.", example="Own our revenue dashboards."),
          number("salary_min", "Lowest salary offered.", required=False, minimum=0,
                 maximum=MAX_AMOUNT),
          number("salary_max", "Highest salary offered.", required=False, minimum=0,
                 maximum=MAX_AMOUNT)],
         {"requisition_id": ident("req", 6), "status": const("published")}),
    tool("schedule_interview", "Book an interview between a candidate and interviewers.",
         [string("candidate", "Candidate name.", example="Kofi Okafor"),
          strings("interviewers", "Interviewer emails.", item_format="email",
                  example=["lena.meyer@example.com"]),
          string("start", "Start time.", fmt="date-time", example="2025-03-14T14:00:00Z"),
          choice("stage", "Interview stage.", ("screen", "technical", "onsite", "final"))],
         {"interview_id": ident("int", 8), "status": const("scheduled"),
          "video_link": lambda d, a: f"https://meet.example.com/{d.hex(9)}"}),
    tool("submit_interview_feedback", "Record an interviewer's scorecard.",
         [string("interview_id", "Interview id.", example="int_2b3c4d5e"),
          choice("recommendation", "Hire recommendation.",
                 ("strong_yes", "yes", "no", "strong_no")),
          string("notes", "Evidence for the rating.", example="Clear system design.")],
         {"interview_id": echo("interview_id"), "recorded": const(True)}),
    tool("onboard_employee", "Create accounts, equipment orders and a checklist for a new hire.",
         [string("name", "New hire's full name.", example="Priya Singh"),
          email("personal_email", "Personal email for the welcome pack.",
                example="priya@example.net"),
          choice("department", "Department.", DEPARTMENTS),
          string("start_date", "First day.", fmt="date", example="2025-04-01")],
         {"employee": lambda d, a: f"{str(a.get('name', '')).lower().replace(' ', '.')}"
                                   "@example.com",
          "checklist_id": ident("onb", 8), "equipment_order": ident("eq", 8)}),
    tool("offboard_employee", "Schedule account removal and equipment return for a leaver.",
         [EMPLOYEE, string("last_day", "Last working day.", fmt="date", example="2025-05-30"),
          boolean("retain_mailbox", "Keep the mailbox for 90 days.", default=True)],
         {"employee": echo("employee"), "checklist_id": ident("off", 8),
          "access_revoked_at": echo("last_day")}),
    tool("get_benefits_summary", "Benefits an employee is enrolled in.",
         [EMPLOYEE],
         {"employee": echo("employee"),
          "benefits": each_of(("health", "dental", "pension", "learning_budget"),
                              {"enrolled": pick(True, True, False),
                               "annual_value": money(200, 6000)}, key="benefit")}),
    tool("calculate_prorated_salary", "Salary owed for part of a year, prorated by month.",
         [number("annual_salary", "Annual salary.", exclusive_minimum=0, maximum=MAX_AMOUNT,
                 example=60000),
          string("start_date", "First paid day.", fmt="date", example="2025-03-17"),
          string("end_date", "Last paid day.", fmt="date", example="2025-06-30"), CURRENCY],
         compute=prorated_salary),
    tool("calculate_overtime_pay", "Regular and overtime pay for hours worked in a week.",
         [number("hours_worked", "Hours worked.", minimum=0, maximum=168, example=46),
          number("hourly_rate", "Base hourly rate.", exclusive_minimum=0, maximum=MAX_PAYMENT,
                 example=22),
          number("regular_hours", "Hours before overtime.", required=False, minimum=0,
                 maximum=168, default=40),
          number("overtime_multiplier", "Overtime multiplier.", required=False, minimum=1,
                 maximum=10, default=1.5)],
         compute=overtime_pay),
    tool("list_training_courses", "Courses assigned to an employee and their completion.",
         [EMPLOYEE],
         {"courses": each_of(("Security awareness", "Code of conduct", "Data protection"),
                             {"due": on_day(5, 60), "completed": pick(True, False)},
                             key="course"),
          "last_login": at_time(-10, 0)}),
)
# fmt: on
