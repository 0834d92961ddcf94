"""Productivity tools: calendar, email, team chat, tasks and notes."""

from __future__ import annotations

from datetime import date, timedelta

from prism_tools.examples._build import (
    LIMIT,
    QUERY,
    REFERENCE_DAY,
    Args,
    Draw,
    Field,
    Spec,
    at_time,
    boolean,
    chance,
    check_day,
    choice,
    const,
    contact,
    count_weekdays,
    day,
    each_of,
    echo,
    email,
    fmt,
    from_list,
    group,
    ident,
    int_arg,
    integer,
    iso_stamp,
    moment,
    on_day,
    parse_day,
    person,
    pick,
    quoted,
    rint,
    rows,
    several,
    string,
    strings,
    text_arg,
    title,
    tool,
)
from prism_tools.types import JSONValue

EVENT_ID = string("event_id", "Calendar event id, e.g. 'evt_3f9a1c0b2d'.", example="evt_3f9a1c0b2d")
MESSAGE_ID = string("message_id", "Email message id.", example="msg_7c1e04d2aa")
CHANNEL = string("channel", "Channel name without '#', e.g. 'release-train'.", example="general")
TASK_ID = string("task_id", "Task id, e.g. 'TSK-1042'.", example="TSK-1042")
PROJECT = string("project", "Project key, e.g. 'WEB'.", example="WEB")
CALENDAR = string(
    "calendar_id", "Calendar to use; 'primary' is the user's own.", required=False,
    default="primary",
)  # fmt: skip


def _parse(args: Args, name: str) -> date:
    value = text_arg(args, name)
    try:
        when = date.fromisoformat(value[:10])
    except ValueError as err:
        raise ValueError(f"'{name}' must be a date as YYYY-MM-DD, got {quoted(value)}") from err
    return check_day(when, name)


def days_between(args: Args) -> JSONValue:
    start, end = _parse(args, "start_date"), _parse(args, "end_date")
    span = (end - start).days
    # Business days from start (included) towards end (excluded), negative when counting back.
    if span >= 0:
        weekdays = count_weekdays(start, span)
    else:
        weekdays = -count_weekdays(end + timedelta(days=1), -span)
    return {"days": span, "weeks": round(span / 7, 2), "business_days": weekdays}


def add_business_days(args: Args) -> JSONValue:
    current = _parse(args, "start_date")
    remaining = int_arg(args, "days")
    step = 1 if remaining >= 0 else -1
    while remaining:
        current += timedelta(days=step)
        if current.weekday() < 5:
            remaining -= step
    return {"date": current.isoformat(), "weekday": current.strftime("%A")}


def day_info(args: Args) -> JSONValue:
    when = _parse(args, "date")
    iso_year, iso_week, _ = when.isocalendar()
    first = date(when.year, 1, 1)
    return {
        "date": when.isoformat(),
        "weekday": when.strftime("%A"),
        "iso_week": iso_week,
        "iso_year": iso_year,
        "day_of_year": (when - first).days + 1,
        "quarter": (when.month - 1) // 3 + 1,
        "is_weekend": when.weekday() >= 5,
    }


def free_slots(args: Args) -> JSONValue:
    when = parse_day(args.get("date"))
    minutes = args.get("duration_minutes")
    duration = minutes if isinstance(minutes, int) else 30
    people = args.get("attendees")
    attendees = people if isinstance(people, list) else []
    draw = Draw.seeded("busy", when.isoformat(), sorted(map(str, attendees)))
    # Mark each half hour between 09:00 and 17:00 busy for roughly a third of the time.
    free = [draw.sub(half).unit() > 0.35 for half in range(16)]
    need = max(1, -(-duration // 30))
    slots: list[JSONValue] = []
    for start in range(16 - need + 1):
        if all(free[start : start + need]):
            minute = 9 * 60 + start * 30
            slots.append(
                {
                    "start": iso_stamp(when, minute // 60, minute % 60),
                    "end": iso_stamp(when, (minute + duration) // 60, (minute + duration) % 60),
                }
            )
    return {"date": when.isoformat(), "duration_minutes": duration, "slots": slots[:6]}


def next_milestone() -> Field:
    """A field with the next milestone's name and date."""

    def field(draw: Draw, args: Args) -> JSONValue:
        return {
            "name": draw.sub("n").pick(("Beta", "Public launch", "Code freeze", "GA")),
            "date": (REFERENCE_DAY + timedelta(days=draw.sub("d").integer(7, 60))).isoformat(),
        }

    return field


def burndown(args: Args) -> JSONValue:
    """A falling line of remaining points, with a hash-driven wobble."""
    draw = Draw.seeded("burndown", args.get("sprint_id"))
    total = draw.integer(30, 80)
    remaining, line = total, []
    for index in range(10):
        line.append({"day": index + 1, "remaining_points": remaining})
        remaining = max(0, remaining - draw.sub(index).integer(0, total // 6))
    return {"sprint_id": args.get("sprint_id"), "committed_points": total, "days": line}


def velocity(args: Args) -> JSONValue:
    """Points per sprint and their average."""
    count = args.get("sprints")
    sprints = count if isinstance(count, int) else 4
    draw = Draw.seeded("velocity", args.get("project"))
    points = [draw.sub(i).integer(18, 46) for i in range(sprints)]
    return {
        "project": args.get("project"),
        "points": points,
        "average": round(sum(points) / len(points), 1) if points else 0,
    }


EVENT_ROW = {
    "event_id": ident("evt"),
    "title": title(),
    "start": at_time(0, 6),
    "duration_minutes": pick(15, 30, 45, 60, 90),
    "organizer": person(),
    "location": pick("Room 4.12", "Video call", "Cafe Aurora", "Main auditorium"),
}
EMAIL_ROW = {
    "message_id": ident("msg"),
    "from": contact(),
    "subject": title(),
    "received_at": at_time(-5, 0),
    "unread": chance(0.4),
    "has_attachments": chance(0.25),
}
TASK_ROW = {
    "task_id": lambda d, a: f"TSK-{d.integer(1000, 9999)}",
    "title": title(),
    "status": pick("todo", "in_progress", "in_review", "done"),
    "assignee": person(),
    "due": on_day(1, 21),
    "priority": pick("low", "medium", "high"),
}

# fmt: off
CALENDAR_SPECS = group(
    "calendar",
    tool("list_calendar_events", "Events on a calendar between two dates, earliest first.",
         [day("start_date", "First day to include."), day("end_date", "Last day to include."),
          CALENDAR, LIMIT],
         {"calendar_id": echo("calendar_id"),
          "events": rows({**EVENT_ROW, "start": at_time(0, 6, base="start_date")})}),
    tool("get_calendar_event", "Full details of one calendar event, including attendees.",
         [EVENT_ID],
         {"event_id": echo("event_id"), "title": title(), "start": at_time(0, 6),
          "duration_minutes": pick(30, 45, 60), "organizer": contact(),
          "attendees": rows({"attendee": contact(),
                             "response": pick("accepted", "declined", "tentative", "pending")},
                            count_arg="none", default=3),
          "conference_link": lambda d, a: f"https://meet.example.com/{d.hex(9)}"}),
    tool("create_calendar_event", "Create an event on a calendar and invite attendees.",
         [string("title", "Event title.", example="Pricing review"),
          moment("start", "Start time."),
          integer("duration_minutes", "Length in minutes.", minimum=5, maximum=720, example=30),
          strings("attendees", "Email addresses to invite.", required=False, min_items=0,
                  item_format="email", example=["lena.meyer@example.com"]),
          string("location", "Room, address or 'video'.", required=False), CALENDAR],
         {"event_id": ident("evt"), "title": echo("title"), "start": echo("start"),
          "duration_minutes": echo("duration_minutes"), "status": const("confirmed"),
          "invites_sent": lambda d, a: len(a.get("attendees") or [])}),
    tool("update_calendar_event", "Change the title, time, length or location of an event.",
         [EVENT_ID, string("title", "New title.", required=False),
          moment("start", "New start time.", required=False),
          integer("duration_minutes", "New length in minutes.", required=False, minimum=5,
                  maximum=720),
          string("location", "New location.", required=False)],
         {"event_id": echo("event_id"), "status": const("updated"),
          "notified_attendees": rint(0, 8)}),
    tool("delete_calendar_event", "Delete an event; attendees get a cancellation notice.",
         [EVENT_ID, boolean("notify_attendees", "Email a cancellation notice.", default=True)],
         {"event_id": echo("event_id"), "deleted": const(True)}),
    tool("find_free_time_slots",
         "Times on a day when every attendee is free for a meeting of the given length.",
         [strings("attendees", "Email addresses of the people who must attend.",
                  item_format="email", example=["ana.ribeiro@example.com"]),
          day("date", "Day to search."),
          integer("duration_minutes", "Meeting length.", minimum=15, maximum=240, example=30)],
         compute=free_slots, kind="search"),
    tool("respond_to_invitation", "Accept, decline or tentatively accept a meeting invitation.",
         [EVENT_ID, choice("response", "Your answer.", ("accepted", "declined", "tentative")),
          string("comment", "Optional note to the organizer.", required=False)],
         {"event_id": echo("event_id"), "response": echo("response"), "sent": const(True)}),
    tool("list_calendars", "Calendars the user can see, with access level and colour.",
         [],
         {"calendars": each_of(("Work", "Personal", "Team holidays", "On-call"),
                               {"calendar_id": ident("cal", 8),
                                "access": pick("owner", "writer", "reader")})}),
    tool("create_recurring_event", "Create an event that repeats daily, weekly or monthly.",
         [string("title", "Event title.", example="Team standup"), moment("first_start",
          "Start of the first occurrence."),
          integer("duration_minutes", "Length in minutes.", minimum=5, maximum=480, example=15),
          choice("frequency", "How often it repeats.", ("daily", "weekdays", "weekly", "monthly")),
          integer("occurrences", "How many times; omit for no end.", required=False, minimum=1,
                  maximum=500)],
         {"series_id": ident("ser"), "title": echo("title"), "frequency": echo("frequency"),
          "status": const("confirmed")}),
    tool("set_event_reminder", "Add a reminder before an event.",
         [EVENT_ID, integer("minutes_before", "When to remind.", minimum=0, maximum=10080,
                            example=15),
          choice("method", "How to remind.", ("popup", "email", "sms"), required=False,
                 default="popup")],
         {"event_id": echo("event_id"), "reminder_id": ident("rem", 8),
          "minutes_before": echo("minutes_before"), "method": echo("method")}),
    tool("get_daily_agenda", "The user's schedule for one day, with gaps between meetings.",
         [day("date", "Day to show."), CALENDAR],
         {"date": echo("date"),
          "events": rows({**EVENT_ROW, "start": at_time(0, 0, base="date")}, count_arg="none",
                         default=4),
          "focus_time_minutes": rint(30, 300)}),
    tool("check_availability", "Whether each person is free or busy at a given time.",
         [strings("people", "Email addresses to check.", item_format="email",
                  example=["priya.singh@example.com"]),
          moment("start", "Start of the window."),
          integer("duration_minutes", "Length of the window.", minimum=5, maximum=480,
                  example=60)],
         {"start": echo("start"), "availability": from_list("people", {"free": chance(0.6)},
                                                           key="person")}),
    tool("days_between_dates", "Calendar days, weeks and business days between two dates.",
         [day("start_date", "First date."), day("end_date", "Second date.", example="2025-04-01")],
         compute=days_between, kind="think"),
    tool("add_business_days", "The date a number of business days (Mon-Fri) after a date.",
         [day("start_date", "Date to start from."),
          integer("days", "Business days to add; negative counts back.", minimum=-3650,
                  maximum=3650, example=10)],
         compute=add_business_days, kind="think"),
    tool("get_date_info", "Weekday, ISO week, day of year and quarter for a date.",
         [day("date", "Date to describe.")],
         compute=day_info),
)

EMAIL_SPECS = group(
    "email",
    tool("send_email", "Send an email now from the user's mailbox.",
         [strings("to", "Recipient addresses.", item_format="email",
                  example=["lena.meyer@example.com"]),
          string("subject", "Subject line.", example="Notes from today"),
          string("body", "Plain-text body.", example="Hi Lena, here are the notes."),
          strings("cc", "Carbon-copy addresses.", required=False, min_items=0,
                  item_format="email")],
         {"message_id": ident("msg"), "status": const("sent"), "sent_at": at_time(0, 0),
          "recipients": lambda d, a: len(a.get("to") or []) + len(a.get("cc") or [])}),
    tool("draft_email", "Save an email as a draft without sending it.",
         [strings("to", "Recipient addresses.", item_format="email",
                  example=["lena.meyer@example.com"]),
          string("subject", "Subject line.", example="Draft: offsite plan"),
          string("body", "Plain-text body.", example="Rough plan attached.")],
         {"draft_id": ident("drf"), "subject": echo("subject"), "status": const("saved")}),
    tool("search_emails", "Find emails matching a query (sender, subject or body words).",
         [QUERY, string("folder", "Folder to search.", required=False, default="inbox"),
          day("since", "Only emails received on or after this date.", required=False), LIMIT],
         {"query": echo("query"), "messages": rows(EMAIL_ROW)}),
    tool("read_email", "Full text, headers and attachment list of one email.",
         [MESSAGE_ID],
         {"message_id": echo("message_id"), "from": contact(), "to": several(contact(), 1),
          "subject": title(), "received_at": at_time(-3, 0),
          "body": fmt("Hello,\n\nFollowing up on our conversation. Details below.\n\nThanks"),
          "attachments": rows({"filename": pick("agenda.pdf", "figures.xlsx", "photo.jpg"),
                               "size_kb": rint(12, 4800)}, count_arg="none", default=1)}),
    tool("list_inbox", "The newest emails in the inbox.",
         [boolean("unread_only", "Only unread emails."), LIMIT],
         {"messages": rows(EMAIL_ROW)}),
    tool("reply_to_email", "Reply to an email, keeping the thread.",
         [MESSAGE_ID, string("body", "Reply text.", example="Thanks, that works for me."),
          boolean("reply_all", "Reply to every recipient.")],
         {"message_id": ident("msg"), "in_reply_to": echo("message_id"), "status": const("sent")}),
    tool("forward_email", "Forward an email to other people with an optional note.",
         [MESSAGE_ID, strings("to", "Recipient addresses.", item_format="email",
                              example=["omar.haddad@example.com"]),
          string("note", "Text added above the forwarded message.", required=False)],
         {"message_id": ident("msg"), "forwarded": echo("message_id"), "status": const("sent")}),
    tool("archive_email", "Move an email out of the inbox into the archive.",
         [MESSAGE_ID], {"message_id": echo("message_id"), "folder": const("archive")}),
    tool("delete_email", "Move an email to the trash (kept for 30 days).",
         [MESSAGE_ID], {"message_id": echo("message_id"), "folder": const("trash"),
                        "purge_on": on_day(30, 30)}),
    tool("mark_email_read", "Mark emails as read or unread.",
         [strings("message_ids", "Emails to change.", example=["msg_7c1e04d2aa"]),
          boolean("unread", "Mark as unread instead.")],
         {"updated": lambda d, a: len(a.get("message_ids") or []),
          "state": lambda d, a: "unread" if a.get("unread") else "read"}),
    tool("label_email", "Add labels to an email, creating labels that do not exist.",
         [MESSAGE_ID, strings("labels", "Labels to add.", example=["invoices"])],
         {"message_id": echo("message_id"), "labels": echo("labels")}),
    tool("list_email_labels", "Labels in the mailbox with unread counts.",
         [], {"labels": each_of(("invoices", "travel", "team", "newsletters", "legal"),
                                {"unread": rint(0, 40)})}),
    tool("create_email_filter", "Create a rule that labels, archives or forwards new mail.",
         [string("from_contains", "Match senders containing this text.", example="@example.com"),
          choice("action", "What to do with matching mail.",
                 ("label", "archive", "forward", "mark_read")),
          string("action_value", "Label name or forwarding address, when needed.",
                 required=False)],
         {"filter_id": ident("flt", 8), "status": const("active")}),
    tool("get_email_thread", "Every message of a conversation, oldest first.",
         [string("thread_id", "Conversation id.", example="thr_51a0c9")],
         {"thread_id": echo("thread_id"), "subject": title(),
          "messages": rows(EMAIL_ROW, count_arg="none", default=4)}),
    tool("schedule_email", "Send an email at a later time.",
         [strings("to", "Recipient addresses.", item_format="email",
                  example=["rosa.costa@example.com"]),
          string("subject", "Subject line.", example="Reminder"),
          string("body", "Plain-text body.", example="Friendly reminder about Friday."),
          moment("send_at", "When to send.")],
         {"scheduled_id": ident("sch"), "send_at": echo("send_at"), "status": const("scheduled")}),
    tool("unsubscribe_from_mailing_list", "Unsubscribe the user from a sender's mailing list.",
         [email("sender", "Address the newsletters come from.", example="news@example.com")],
         {"sender": echo("sender"), "status": pick("unsubscribed", "request_sent")}),
    tool("count_unread_emails", "Number of unread emails per folder.",
         [], {"inbox": rint(0, 60), "updates": rint(0, 200), "promotions": rint(0, 400)}),
)

CHAT_SPECS = group(
    "chat",
    tool("send_chat_message", "Post a message to a team chat channel.",
         [CHANNEL, string("text", "Message text (Markdown).", example="Deploy finished."),
          string("thread_ts", "Reply inside this thread.", required=False)],
         {"channel": echo("channel"), "message_ts": lambda d, a: f"1741000{d.integer(100, 999)}.0"
          f"{d.sub('x').integer(1000, 9999)}", "status": const("posted")}),
    tool("list_chat_channels", "Channels the user belongs to, with member counts.",
         [boolean("include_archived", "Also list archived channels."), LIMIT],
         {"channels": each_of(("general", "release-train", "incidents", "design", "random"),
                              {"members": rint(3, 400), "is_private": chance(0.3)})}),
    tool("create_chat_channel", "Create a public or private channel.",
         [string("name", "Channel name: lowercase, digits and dashes.", pattern="^[a-z0-9-]{1,80}$",
                 example="launch-war-room"),
          boolean("private", "Make the channel private."),
          string("topic", "Channel topic.", required=False)],
         {"channel_id": ident("ch", 9), "name": echo("name"), "private": echo("private")}),
    tool("invite_to_chat_channel", "Add people to a channel.",
         [CHANNEL, strings("users", "Email addresses to add.", item_format="email",
                           example=["tomas.novak@example.com"])],
         {"channel": echo("channel"), "added": from_list("users", {"ok": const(True)},
                                                         key="user")}),
    tool("get_chat_history", "Recent messages in a channel, newest last.",
         [CHANNEL, LIMIT],
         {"channel": echo("channel"),
          "messages": rows({"author": person(), "text": fmt("Quick update on {channel}."),
                            "posted_at": at_time(-2, 0), "reactions": rint(0, 6)})}),
    tool("react_to_chat_message", "Add an emoji reaction to a message.",
         [CHANNEL, string("message_ts", "Message timestamp id.", example="1741000123.0042"),
          string("emoji", "Emoji name without colons.", example="tada")],
         {"channel": echo("channel"), "emoji": echo("emoji"), "ok": const(True)}),
    tool("pin_chat_message", "Pin a message to the top of a channel.",
         [CHANNEL, string("message_ts", "Message timestamp id.", example="1741000123.0042")],
         {"channel": echo("channel"), "pinned": const(True)}),
    tool("set_chat_status", "Set the user's status text, emoji and expiry.",
         [string("text", "Status text.", example="In workshops until 3pm"),
          string("emoji", "Emoji name.", required=False, default="speech_balloon"),
          integer("expires_in_minutes", "Clear after this long.", required=False, minimum=1,
                  maximum=10080)],
         {"status": echo("text"), "emoji": echo("emoji"), "ok": const(True)}),
    tool("schedule_chat_message", "Post a message to a channel at a later time.",
         [CHANNEL, string("text", "Message text.", example="Standup in 5 minutes!"),
          moment("post_at", "When to post.")],
         {"scheduled_message_id": ident("smsg", 8), "post_at": echo("post_at")}),
    tool("send_sms", "Send a text message to a phone number.",
         [string("to", "E.164 phone number.", pattern="^\\+[1-9][0-9]{6,14}$",
                 example="+14155550123"),
          string("text", "Message, up to 480 characters.", max_length=480,
                 example="Your table is ready.")],
         {"sms_id": ident("sms"), "segments": lambda d, a: 1 + len(str(a.get("text", ""))) // 160,
          "status": const("queued")}),
    tool("send_push_notification", "Send a push notification to a user's devices.",
         [string("user_id", "User to notify.", example="usr_1029"),
          string("title", "Notification title.", example="Order shipped"),
          string("body", "Notification text.", example="Your parcel is on its way.")],
         {"notification_id": ident("ntf"), "devices": rint(1, 3), "status": const("sent")}),
)

TASK_SPECS = group(
    "tasks",
    tool("create_task", "Create a task in a project.",
         [PROJECT, string("title", "What needs doing.", example="Update pricing page copy"),
          string("description", "Details and acceptance criteria.", required=False),
          email("assignee", "Who should do it.", required=False),
          day("due_date", "Due date.", required=False),
          choice("priority", "Priority.", ("low", "medium", "high", "urgent"), required=False,
                 default="medium")],
         {"task_id": lambda d, a: f"{a.get('project', 'TSK')}-{d.integer(100, 9999)}",
          "title": echo("title"), "status": const("todo"), "priority": echo("priority")}),
    tool("get_task", "Details of one task: status, assignee, dates, comments count.",
         [TASK_ID], {"task_id": echo("task_id"), **{k: v for k, v in TASK_ROW.items()
                                                     if k != "task_id"},
                     "comments": rint(0, 12)}),
    tool("update_task", "Change a task's title, status, priority or due date.",
         [TASK_ID, string("title", "New title.", required=False),
          choice("status", "New status.", ("todo", "in_progress", "in_review", "done"),
                 required=False),
          choice("priority", "New priority.", ("low", "medium", "high", "urgent"),
                 required=False),
          day("due_date", "New due date.", required=False)],
         {"task_id": echo("task_id"), "updated": const(True)}),
    tool("list_tasks", "Tasks in a project, optionally filtered by status or assignee.",
         [PROJECT, choice("status", "Only tasks in this status.",
                          ("todo", "in_progress", "in_review", "done"), required=False),
          email("assignee", "Only tasks assigned to this person.", required=False), LIMIT],
         {"project": echo("project"), "tasks": rows(TASK_ROW)}),
    tool("assign_task", "Assign a task to someone.",
         [TASK_ID, email("assignee", "Who should do it.")],
         {"task_id": echo("task_id"), "assignee": echo("assignee")}),
    tool("complete_task", "Mark a task as done.",
         [TASK_ID, string("resolution_note", "What was done.", required=False)],
         {"task_id": echo("task_id"), "status": const("done"), "completed_at": at_time(0, 0)}),
    tool("add_task_comment", "Comment on a task.",
         [TASK_ID, string("text", "Comment text (Markdown).", example="Blocked on design.")],
         {"task_id": echo("task_id"), "comment_id": ident("cmt", 8)}),
    tool("create_project", "Create a project with a key and a lead.",
         [string("name", "Project name.", example="Website relaunch"),
          string("key", "Short uppercase key.", pattern="^[A-Z][A-Z0-9]{1,9}$", example="WEB"),
          email("lead", "Project lead.")],
         {"project_id": ident("prj", 8), "key": echo("key"), "name": echo("name")}),
    tool("get_project_status", "Progress summary of a project: open, done, overdue and at risk.",
         [PROJECT],
         {"project": echo("project"), "open": rint(5, 80), "done": rint(10, 200),
          "overdue": rint(0, 9), "health": pick("on_track", "at_risk", "off_track"),
          "next_milestone": next_milestone()}),
    tool("create_sprint", "Create a sprint with dates and a goal.",
         [PROJECT, string("goal", "Sprint goal.", example="Ship checkout v2"),
          day("start_date", "First day."), integer("length_days", "Sprint length.", minimum=5,
                                                   maximum=30, example=14)],
         {"sprint_id": ident("spr", 8), "goal": echo("goal"), "state": const("planned")}),
    tool("add_task_to_sprint", "Move a task into a sprint.",
         [TASK_ID, string("sprint_id", "Sprint id.", example="spr_0af19e2c")],
         {"task_id": echo("task_id"), "sprint_id": echo("sprint_id")}),
    tool("get_sprint_burndown", "Remaining story points per day of a sprint.",
         [string("sprint_id", "Sprint id.", example="spr_0af19e2c")],
         compute=burndown),
    tool("link_tasks", "Record that one task blocks, duplicates or relates to another.",
         [string("from_task_id", "Source task.", example="TSK-1042"),
          string("to_task_id", "Target task.", example="TSK-1043"),
          choice("relation", "Kind of link.", ("blocks", "duplicates", "relates_to"))],
         {"link_id": ident("lnk", 8), "relation": echo("relation")}),
    tool("create_note", "Save a note in the user's notebook.",
         [string("title", "Note title.", example="Ideas"),
          string("content", "Note body (Markdown).", example="- try the new onboarding flow"),
          strings("tags", "Tags.", required=False, min_items=0)],
         {"note_id": ident("note", 8), "title": echo("title"), "saved": const(True)}),
    tool("search_notes", "Find notes whose title or text matches a query.",
         [QUERY, LIMIT],
         {"notes": rows({"note_id": ident("note", 8), "title": title(),
                         "updated_at": at_time(-30, 0)})}),
    tool("get_team_velocity", "Story points completed in each of the last sprints.",
         [PROJECT, integer("sprints", "How many past sprints.", minimum=1, maximum=12,
                           example=4)],
         compute=velocity),
)
# fmt: on


SPECS: tuple[Spec, ...] = CALENDAR_SPECS + EMAIL_SPECS + CHAT_SPECS + TASK_SPECS
