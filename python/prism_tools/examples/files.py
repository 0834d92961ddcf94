"""File and document tools over a pretend cloud drive (nothing touches the real disk)."""

from __future__ import annotations

import base64
import hashlib
import posixpath
import zlib

from prism_tools.examples._build import (
    LIMIT,
    QUERY,
    Args,
    Draw,
    Spec,
    at_time,
    boolean,
    choice,
    const,
    each_of,
    echo,
    email,
    fmt,
    group,
    ident,
    integer,
    link,
    person,
    rint,
    rows,
    string,
    strings,
    text_arg,
    tool,
)
from prism_tools.types import JSONValue

PATH = string("path", "Absolute path in the drive, e.g. '/reports/q1.pdf'.", pattern="^/",
              example="/reports/q1-summary.pdf")  # fmt: skip
DIRECTORY = string("path", "Absolute folder path, e.g. '/reports'.", pattern="^/",
                   example="/reports")  # fmt: skip
DOC_ID = string("document_id", "Document id, e.g. 'doc_91ac3e'.", example="doc_91ac3e")

_EXTENSIONS = ("pdf", "docx", "xlsx", "png", "csv", "md", "pptx", "txt")
_MIME = {"pdf": "application/pdf", "png": "image/png", "csv": "text/csv", "md": "text/markdown",
         "txt": "text/plain", "docx": "application/vnd.openxmlformats-officedocument"
         ".wordprocessingml.document"}  # fmt: skip


def list_directory(args: Args) -> JSONValue:
    folder = text_arg(args, "path").rstrip("/") or "/"
    limit = args.get("limit")
    count = limit if isinstance(limit, int) else 5
    draw = Draw.seeded("dir", folder)
    entries: list[JSONValue] = []
    for index in range(count):
        item = draw.sub(index)
        is_folder = item.sub("folder").unit() < 0.25
        stem = f"{item.sub('t').pick(('notes', 'plan', 'budget', 'export', 'draft', 'photo'))}"
        name = f"{stem}-{index + 1}" if is_folder else f"{stem}-{index + 1}."
        if not is_folder:
            name += item.sub("ext").pick(_EXTENSIONS)
        entries.append(
            {
                "name": name,
                "path": posixpath.join(folder, name),
                "type": "folder" if is_folder else "file",
                "size_bytes": None if is_folder else item.sub("size").integer(200, 9_000_000),
                "modified_at": at_time(-60, 0)(item.sub("m"), args),
            }
        )
    return {"path": folder, "entries": entries}


def file_metadata(args: Args) -> JSONValue:
    path = text_arg(args, "path")
    draw = Draw.seeded("file", path)
    extension = posixpath.splitext(path)[1].lstrip(".").lower()
    return {
        "path": path,
        "name": posixpath.basename(path),
        "size_bytes": draw.sub("size").integer(200, 25_000_000),
        "mime_type": _MIME.get(extension, "application/octet-stream"),
        "owner": person()(draw.sub("owner"), args),
        "created_at": at_time(-400, -61)(draw.sub("c"), args),
        "modified_at": at_time(-60, 0)(draw.sub("m"), args),
        "shared": draw.sub("shared").unit() < 0.4,
    }


def checksum(args: Args) -> JSONValue:
    content = text_arg(args, "content").encode("utf-8")
    algorithm = str(args.get("algorithm", "sha256"))
    if algorithm == "crc32":
        return {"algorithm": algorithm, "digest": f"{zlib.crc32(content):08x}"}
    if algorithm not in ("md5", "sha1", "sha256", "sha512", "blake2b"):
        raise ValueError(f"unsupported algorithm {algorithm!r}")
    digest = hashlib.new(algorithm, content).hexdigest()
    return {"algorithm": algorithm, "digest": digest, "bytes": len(content)}


def normalize_path(args: Args) -> JSONValue:
    raw = text_arg(args, "path")
    base = args.get("base")
    joined = posixpath.join(base, raw) if isinstance(base, str) else raw
    clean = posixpath.normpath(joined)
    if joined.startswith("/") and clean.startswith("//"):
        clean = "/" + clean.lstrip("/")
    return {
        "path": clean,
        "directory": posixpath.dirname(clean),
        "name": posixpath.basename(clean),
        "extension": posixpath.splitext(clean)[1],
        "absolute": clean.startswith("/"),
    }


def encode_attachment(args: Args) -> JSONValue:
    content = text_arg(args, "content").encode("utf-8")
    compressed = zlib.compress(content, 9)
    return {
        "filename": args.get("filename"),
        "original_bytes": len(content),
        "compressed_bytes": len(compressed),
        "base64": base64.b64encode(compressed).decode("ascii"),
    }


def _file_hit(draw: Draw, args: Args) -> JSONValue:
    stem = f"{draw.pick(('Q1', 'Q2', 'Offsite', 'Hiring', 'Pricing'))} "
    name = f"{stem}{draw.sub('k').pick(('summary', 'plan', 'notes', 'budget'))}"
    name += f".{draw.sub('e').pick(_EXTENSIONS)}"
    folder = draw.sub("f").pick(("/shared", "/reports", "/projects/launch", "/finance"))
    return {
        "name": name,
        "path": posixpath.join(folder, name),
        "modified_at": at_time(-90, 0)(draw.sub("m"), args),
        "owner": person()(draw.sub("o"), args),
    }


def _shared_file(draw: Draw, args: Args) -> JSONValue:
    hit = _file_hit(draw, args)
    assert isinstance(hit, dict)
    return {
        **hit,
        "shared_at": at_time(-20, 0)(draw.sub("s"), args),
        "role": draw.sub("r").pick(("viewer", "commenter", "editor")),
    }


def _copy_path(draw: Draw, args: Args) -> JSONValue:
    name = args.get("new_name") or posixpath.basename(str(args.get("path", "")))
    return posixpath.join(str(args.get("destination", "/")), str(name))


def _converted_path(draw: Draw, args: Args) -> JSONValue:
    stem = posixpath.splitext(str(args.get("path", "")))[0]
    return f"{stem}.{args.get('target_format')}"


# fmt: off
SPECS: tuple[Spec, ...] = group(
    "files",
    tool("list_directory", "Files and folders inside a drive folder.",
         [DIRECTORY, LIMIT], compute=list_directory),
    tool("get_file_metadata", "Size, type, owner, dates and sharing state of a file.",
         [PATH], compute=file_metadata),
    tool("search_files", "Find files by name or content across the drive, best match first.",
         [QUERY, choice("file_type", "Only this kind of file.",
                        ("any", "document", "spreadsheet", "presentation", "image", "pdf"),
                        required=False, default="any"), LIMIT],
         {"query": echo("query"), "results": rows(_file_hit)}),
    tool("read_text_file", "Text content of a small text file (up to 64 KiB).",
         [PATH], {"path": echo("path"), "encoding": const("utf-8"),
                  "content": fmt("# {path}\n\nPlaceholder text from the example drive.\n")}),
    tool("create_document", "Create a new document with a title and optional text.",
         [string("title", "Document title.", example="Launch checklist"),
          string("folder", "Folder to create it in.", pattern="^/", example="/projects"),
          string("content", "Initial text (Markdown).", required=False)],
         {"document_id": ident("doc", 6), "title": echo("title"),
          "url": link("docs", "d/")}),
    tool("share_file", "Share a file or folder with people, with a given access level.",
         [PATH, strings("people", "Email addresses to share with.", item_format="email",
                        example=["julia.byrne@example.com"]),
          choice("role", "Access to grant.", ("viewer", "commenter", "editor")),
          boolean("notify", "Email the people about the share.", default=True)],
         {"path": echo("path"), "role": echo("role"),
          "shared_with": lambda d, a: len(a.get("people") or [])}),
    tool("move_file", "Move a file or folder to another folder.",
         [PATH, string("destination", "Target folder.", pattern="^/", example="/archive")],
         {"from": echo("path"), "to": fmt("{destination}"), "moved": const(True)}),
    tool("copy_file", "Copy a file to another folder, optionally under a new name.",
         [PATH, string("destination", "Target folder.", pattern="^/", example="/backup"),
          string("new_name", "Name for the copy.", required=False)],
         {"source": echo("path"), "copy_path": _copy_path,
          "file_id": ident("file", 10)}),
    tool("delete_file", "Move a file or folder to the drive's trash.",
         [PATH, boolean("permanent", "Skip the trash and delete for good.")],
         {"path": echo("path"), "deleted": const(True),
          "recoverable": lambda d, a: not a.get("permanent")}),
    tool("rename_file", "Rename a file or folder in place.",
         [PATH, string("new_name", "New name, without a folder.", pattern="^[^/]+$",
                       example="q1-final.pdf")],
         {"path": echo("path"), "new_name": echo("new_name"), "renamed": const(True)}),
    tool("create_folder", "Create a folder (and missing parents).",
         [DIRECTORY], {"path": echo("path"), "created": const(True)}),
    tool("get_storage_quota", "Storage used and available in the drive, by category.",
         [], {"used_gb": lambda d, a: round(d.number(10, 180, 1), 1), "total_gb": const(200),
              "by_type_gb": lambda d, a: {"documents": d.sub("d").number(1, 20, 1),
                                          "media": d.sub("m").number(5, 90, 1),
                                          "other": d.sub("o").number(1, 30, 1)}}),
    tool("compress_files", "Zip several files into one archive in the drive.",
         [strings("paths", "Files to include.", example=["/reports/q1-summary.pdf"]),
          string("archive_path", "Where to write the .zip.", pattern="^/.+\\.zip$",
                 example="/exports/reports.zip")],
         {"archive_path": echo("archive_path"),
          "files": lambda d, a: len(a.get("paths") or []), "size_bytes": rint(10_000, 9_000_000)}),
    tool("convert_document_format", "Convert a document to another format (e.g. DOCX to PDF).",
         [PATH, choice("target_format", "Format to produce.", ("pdf", "docx", "odt", "txt", "md",
                                                              "html"))],
         {"source": echo("path"), "output_path": _converted_path,
          "pages": rint(1, 40)}),
    tool("get_file_revisions", "Saved revisions of a document, newest first.",
         [PATH, LIMIT],
         {"path": echo("path"), "revisions": rows({"revision_id": ident("rev", 8),
                                                   "author": person(),
                                                   "saved_at": at_time(-30, 0),
                                                   "size_bytes": rint(1000, 400_000)})}),
    tool("restore_file_revision", "Make an earlier revision the current version of a file.",
         [PATH, string("revision_id", "Revision to restore.", example="rev_1a2b3c4d")],
         {"path": echo("path"), "restored_revision": echo("revision_id"),
          "new_revision": ident("rev", 8)}),
    tool("lock_file", "Lock a file against edits by others for a while.",
         [PATH, integer("minutes", "How long to hold the lock.", minimum=1, maximum=480,
                        example=30)],
         {"path": echo("path"), "lock_id": ident("lck", 8), "expires_in_minutes": echo("minutes")}),
    tool("compute_checksum", "Checksum of a piece of text (MD5, SHA-1/256/512, BLAKE2b or CRC32).",
         [string("content", "Text to hash (UTF-8).", min_length=0, example="hello world"),
          choice("algorithm", "Hash function.", ("md5", "sha1", "sha256", "sha512", "blake2b",
                                                 "crc32"), required=False, default="sha256")],
         compute=checksum, kind="think"),
    tool("normalize_path", "Resolve '.', '..' and duplicate slashes in a path, and split it.",
         [string("path", "Path to clean up.", example="/reports/../exports//q1.csv"),
          string("base", "Folder a relative path is relative to.", required=False)],
         compute=normalize_path, kind="think"),
    tool("encode_attachment", "Compress text with zlib and encode it as base64 for upload.",
         [string("filename", "Name of the attachment.", example="notes.txt"),
          string("content", "Text content.", example="Meeting notes")],
         compute=encode_attachment, kind="think"),
    tool("get_document_outline", "Headings of a document with their levels and page numbers.",
         [DOC_ID],
         {"document_id": echo("document_id"), "title": lambda d, a: "Launch checklist",
          "headings": each_of(("Overview", "Goals", "Timeline", "Risks", "Open questions"),
                              {"level": rint(1, 2)}, key="text")}),
    tool("get_share_link", "A link to a file that anyone with the link can open.",
         [PATH, choice("access", "What the link allows.", ("view", "comment", "edit"),
                       required=False, default="view"),
          integer("expires_in_days", "Link lifetime.", required=False, minimum=1, maximum=365)],
         {"path": echo("path"), "url": link("drive", "s/"), "access": echo("access")},
         kind="edit"),
    tool("list_shared_with_me", "Files other people shared with the user, newest first.",
         [LIMIT], {"files": rows(_shared_file)}),
    tool("transfer_file_ownership", "Make another person the owner of a file.",
         [PATH, email("new_owner", "The new owner.")],
         {"path": echo("path"), "owner": echo("new_owner"), "status": const("transferred")}),
)
# fmt: on
