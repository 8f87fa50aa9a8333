"""A public library catalog: search, browse, book details, patrons, and holds.

The catalog is fixed (41 real books; copy counts and shelf marks are made up);
the only mutable part is each patron's list of holds. Text matching ignores case,
accents and apostrophes, so "bronte" finds "Brontë" and "hitchhikers" finds
"Hitchhiker's".
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

from envace_demo.envs._common import Failure, Handler, ToolEnvironment

HOLD_LIMIT = 3
MAX_RESULTS = 10  # the tools.json maxItems of every result list

GENRES = (
    "classic",
    "fiction",
    "science-fiction",
    "fantasy",
    "mystery",
    "horror",
    "science",
    "history",
    "memoir",
)

# (title, author, year, genre, shelf mark, copies, copies on the shelf)
_CATALOG: tuple[tuple[str, str, int, str, str, int, int], ...] = (
    ("Nineteen Eighty-Four", "George Orwell", 1949, "science-fiction", "SF ORW", 4, 0),
    ("Animal Farm", "George Orwell", 1945, "fiction", "FIC ORW", 3, 2),
    ("Brave New World", "Aldous Huxley", 1932, "science-fiction", "SF HUX", 2, 1),
    ("Fahrenheit 451", "Ray Bradbury", 1953, "science-fiction", "SF BRA", 2, 2),
    ("Dune", "Frank Herbert", 1965, "science-fiction", "SF HER", 3, 0),
    ("Foundation", "Isaac Asimov", 1951, "science-fiction", "SF ASI", 2, 1),
    ("The Left Hand of Darkness", "Ursula K. Le Guin", 1969, "science-fiction", "SF LEG", 1, 1),
    ("Neuromancer", "William Gibson", 1984, "science-fiction", "SF GIB", 1, 0),
    ("The Hitchhiker's Guide to the Galaxy", "Douglas Adams", 1979, "science-fiction", "SF ADA", 3, 3),
    ("The Hobbit", "J. R. R. Tolkien", 1937, "fantasy", "FAN TOL", 4, 1),
    ("A Wizard of Earthsea", "Ursula K. Le Guin", 1968, "fantasy", "FAN LEG", 2, 2),
    ("Pride and Prejudice", "Jane Austen", 1813, "classic", "CLA AUS", 3, 2),
    ("Emma", "Jane Austen", 1815, "classic", "CLA AUS", 1, 1),
    ("Jane Eyre", "Charlotte Brontë", 1847, "classic", "CLA BRO", 2, 0),
    ("Wuthering Heights", "Emily Brontë", 1847, "classic", "CLA BRO", 2, 1),
    ("Moby-Dick", "Herman Melville", 1851, "classic", "CLA MEL", 1, 1),
    ("Crime and Punishment", "Fyodor Dostoevsky", 1866, "classic", "CLA DOS", 2, 2),
    ("Anna Karenina", "Leo Tolstoy", 1878, "classic", "CLA TOL", 1, 0),
    ("The Great Gatsby", "F. Scott Fitzgerald", 1925, "classic", "CLA FIT", 3, 1),
    ("To Kill a Mockingbird", "Harper Lee", 1960, "fiction", "FIC LEE", 3, 0),
    ("One Hundred Years of Solitude", "Gabriel García Márquez", 1967, "fiction", "FIC GAR", 2, 1),
    ("Things Fall Apart", "Chinua Achebe", 1958, "fiction", "FIC ACH", 2, 2),
    ("Beloved", "Toni Morrison", 1987, "fiction", "FIC MOR", 2, 1),
    ("The Remains of the Day", "Kazuo Ishiguro", 1989, "fiction", "FIC ISH", 1, 1),
    ("Never Let Me Go", "Kazuo Ishiguro", 2005, "fiction", "FIC ISH", 2, 0),
    ("The Road", "Cormac McCarthy", 2006, "fiction", "FIC MCC", 2, 2),
    ("Frankenstein", "Mary Shelley", 1818, "horror", "HOR SHE", 2, 1),
    ("Dracula", "Bram Stoker", 1897, "horror", "HOR STO", 2, 2),
    ("The Hound of the Baskervilles", "Arthur Conan Doyle", 1902, "mystery", "MYS DOY", 2, 1),
    ("The Murder of Roger Ackroyd", "Agatha Christie", 1926, "mystery", "MYS CHR", 1, 0),
    ("And Then There Were None", "Agatha Christie", 1939, "mystery", "MYS CHR", 3, 2),
    ("The Big Sleep", "Raymond Chandler", 1939, "mystery", "MYS CHA", 1, 1),
    ("The Name of the Rose", "Umberto Eco", 1980, "mystery", "MYS ECO", 1, 0),
    ("On the Origin of Species", "Charles Darwin", 1859, "science", "576.8 DAR", 1, 1),
    ("Silent Spring", "Rachel Carson", 1962, "science", "363.7 CAR", 2, 1),
    ("The Selfish Gene", "Richard Dawkins", 1976, "science", "576.5 DAW", 2, 2),
    ("Cosmos", "Carl Sagan", 1980, "science", "520 SAG", 2, 0),
    ("A Brief History of Time", "Stephen Hawking", 1988, "science", "523.1 HAW", 3, 2),
    ("Guns, Germs, and Steel", "Jared Diamond", 1997, "history", "303.4 DIA", 2, 1),
    ("The Diary of a Young Girl", "Anne Frank", 1947, "memoir", "940.53 FRA", 2, 2),
    ("Long Walk to Freedom", "Nelson Mandela", 1994, "memoir", "968.06 MAN", 1, 1),
)


def _seed() -> dict[str, Any]:
    books = {
        f"BK-{i:03d}": {
            "title": t,
            "author": a,
            "year": y,
            "genre": g,
            "shelf": s,
            "copies": c,
            "available": n,
        }
        for i, (t, a, y, g, s, c, n) in enumerate(_CATALOG, 1)
    }
    patrons = {
        "P-1042": {"name": "Maya Lindqvist", "holds": []},
        "P-1077": {"name": "Tom Becker", "holds": ["BK-001", "BK-020", "BK-033"]},
        "P-1100": {"name": "Priya Nair", "holds": ["BK-005"]},
    }
    return {"books": books, "patrons": patrons, "hold_limit": HOLD_LIMIT}


def _fold(text: str) -> str:
    """Lowercase, accents and apostrophes removed, other punctuation as spaces."""
    decomposed = unicodedata.normalize("NFKD", text)
    plain = "".join(ch for ch in decomposed if not unicodedata.combining(ch)).lower()
    plain = re.sub(r"['\u2019]", "", plain)
    return " ".join(re.sub(r"[^\w]+", " ", plain).split())


class LibraryEnvironment(ToolEnvironment):
    name = "library"
    description = "A public library catalog of 41 books: search, browse by genre/year, details, holds."

    def initial_state(self) -> dict[str, Any]:
        return _seed()

    def handlers(self) -> dict[str, Handler]:
        return {
            "search_catalog": self.search_catalog,
            "list_books": self.list_books,
            "get_book": self.get_book,
            "place_hold": self.place_hold,
            "get_patron": self.get_patron,
        }

    def context_reads(self, name: str, arguments: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        book_id = arguments.get("book_id")
        if name != "place_hold" or not isinstance(book_id, str) or not book_id.strip():
            return []
        # The book's copies and queue, and the patron's holds: what a hold's outcome turns on.
        reads = [("get_book", {"book_id": book_id})]
        patron_id = arguments.get("patron_id")
        if isinstance(patron_id, str) and patron_id.strip():
            reads.append(("get_patron", {"patron_id": patron_id}))
        return reads

    # -- helpers ---------------------------------------------------------------

    def _book(self, raw_id: str) -> tuple[str, dict[str, Any]]:
        book_id = raw_id.strip().upper()
        book = self._state["books"].get(book_id)
        if book is None:
            raise Failure("BOOK_NOT_FOUND", f"no book with id {raw_id!r}; ids look like BK-007")
        return book_id, book

    def _patron(self, raw_id: str) -> tuple[str, dict[str, Any]]:
        patron_id = raw_id.strip().upper()
        patron = self._state["patrons"].get(patron_id)
        if patron is None:
            raise Failure("PATRON_NOT_FOUND", f"no patron with library card {raw_id!r}")
        return patron_id, patron

    def _hold_count(self, book_id: str) -> int:
        return sum(book_id in p["holds"] for p in self._state["patrons"].values())

    @staticmethod
    def _summary(book_id: str, book: dict[str, Any]) -> dict[str, Any]:
        return {
            "book_id": book_id,
            "title": book["title"],
            "author": book["author"],
            "year": book["year"],
            "available": book["available"],
        }

    # -- tools -----------------------------------------------------------------

    def search_catalog(self, args: dict[str, Any]) -> dict[str, Any]:
        words = _fold(args["query"]).split()
        if not words:
            raise Failure("INVALID_QUERY", "the query has no letters or digits to search for")
        limit = int(args.get("limit", 5))
        hits = [
            self._summary(book_id, book)
            for book_id, book in self._state["books"].items()
            if all(w in _fold(f"{book['title']} {book['author']}") for w in words)
        ]
        return {"query": args["query"][:100], "total": len(hits), "results": hits[:limit]}

    def list_books(self, args: dict[str, Any]) -> dict[str, Any]:
        genre = args.get("genre")
        if genre is not None and genre not in GENRES:
            raise Failure("INVALID_FILTER", f"unknown genre {genre!r}; genres: {', '.join(GENRES)}")
        author = args.get("author")
        if author is not None and not _fold(author):
            raise Failure("INVALID_FILTER", "author filter is blank")
        year_from, year_to = args.get("year_from"), args.get("year_to")
        if year_from is not None and year_to is not None and year_from > year_to:
            raise Failure("INVALID_FILTER", f"year_from ({year_from}) is after year_to ({year_to})")
        matches = [
            (book_id, book)
            for book_id, book in self._state["books"].items()
            if (genre is None or book["genre"] == genre)
            and (author is None or _fold(author) in _fold(book["author"]))
            and (year_from is None or book["year"] >= year_from)
            and (year_to is None or book["year"] <= year_to)
            and (not args.get("available_only", False) or book["available"] > 0)
        ]
        sort_by = args.get("sort_by", "title")
        matches.sort(key=lambda item: (item[1][sort_by], item[1]["title"]))
        limit = int(args.get("limit", MAX_RESULTS))
        return {"total": len(matches), "books": [self._summary(*m) for m in matches[:limit]]}

    def get_book(self, args: dict[str, Any]) -> dict[str, Any]:
        book_id, book = self._book(args["book_id"])
        return {"book_id": book_id, **book, "holds": self._hold_count(book_id)}

    def get_patron(self, args: dict[str, Any]) -> dict[str, Any]:
        patron_id, patron = self._patron(args["patron_id"])
        return {"patron_id": patron_id, "name": patron["name"], "holds": list(patron["holds"]),
                "hold_limit": HOLD_LIMIT}

    def place_hold(self, args: dict[str, Any]) -> dict[str, Any]:
        book_id, book = self._book(args["book_id"])
        patron_id, patron = self._patron(args["patron_id"])
        if book_id in patron["holds"]:
            raise Failure("ALREADY_ON_HOLD", f"patron {patron_id} already has a hold on {book_id}")
        if len(patron["holds"]) >= HOLD_LIMIT:
            raise Failure(
                "HOLD_LIMIT_REACHED",
                f"patron {patron_id} already has {HOLD_LIMIT} holds, the most "
                "allowed; cancel one at the desk first",
            )
        patron["holds"].append(book_id)
        return {
            "book_id": book_id,
            "title": book["title"],
            "patron_id": patron_id,
            "queue_position": self._hold_count(book_id),
            "copies_available": book["available"],
        }
