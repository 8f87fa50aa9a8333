"""Generated tasks over the ``library`` environment: books, authors, genres, wrong ids
and holds; a section's oldest or newest book, a hold chosen from an author's list, what a
patron holds."""

from __future__ import annotations

from envace_demo.envs.registry import create
from envace_demo.train.generate.script import Add, Say, Script, error

READ_TOOLS = {"search_catalog", "list_books", "get_book"}


def _books(add: Add, say: Say, env_books: dict) -> None:
    """Shelf and copies of a book by id."""
    for i, book_id in enumerate(("BK-001", "BK-005", "BK-010", "BK-014", "BK-020", "BK-027", "BK-033", "BK-040",
                                 "BK-008", "BK-019", "BK-031", "BK-036")):
        book = env_books[book_id]
        s = add(f"book-{book_id}", say(i, ("Where is book {b} shelved, and can I borrow a copy today?",
                                           "Is a copy of {t} ({b}) available, and on which shelf?",
                                           "Look up book {b} for me: shelf and copies available."),
                                       b=book_id, t=book["title"]))
        r = s.call("get_book", {"book_id": book_id}, f"I look up {book_id}.")
        avail = f"{r['available']} of {r['copies']} copies are available" if r["available"] else "no copy is available now"
        s.answer = f"{r['title']} by {r['author']} is on shelf {r['shelf']}; {avail}."
        s.check_call("get_book", {"book_id": book_id})
        s.check_answer(r["shelf"])


def _shelf_marks(add: Add, say: Say) -> None:
    """The shelf mark alone, of a book named by id or by title (the title found first)."""
    for i, book_id in enumerate(("BK-002", "BK-007", "BK-011", "BK-013", "BK-018", "BK-022", "BK-025", "BK-029",
                                 "BK-034", "BK-039")):
        s = add(f"shelf-{book_id}", say(i, ("Which shelf is book {b} on?", "Give me the shelf mark of {b}.",
                                            "On which shelf do I find book {b}?"), b=book_id))
        r = s.call("get_book", {"book_id": book_id}, f"I look up {book_id} for its shelf mark.")
        s.answer = f"{r['title']} ({book_id}) is on shelf {r['shelf']}."
        s.check_call("get_book", {"book_id": book_id})
        s.check_answer(r["shelf"])
    for i, title in enumerate(("Dune", "Emma", "Dracula", "Cosmos", "Frankenstein", "Neuromancer", "Anna Karenina",
                               "Silent Spring")):
        s = add(f"shelf-title-{title.lower().replace(' ', '-')}", say(i, (
            "Where in the library is {t} shelved?", "Which shelf mark does {t} have?",
            "Where do I go to find {t} on the shelves?"), t=title))
        r = s.call("search_catalog", {"query": title}, f"I search the catalog for {title} to find its id.")
        hit = next(h for h in r["results"] if h["title"] == title)
        r = s.call("get_book", {"book_id": hit["book_id"]}, f"{title} is {hit['book_id']}; I look up its shelf mark.")
        s.answer = f"{title} is on shelf {r['shelf']}."
        s.check_call("get_book", {"book_id": hit["book_id"]})
        s.check_answer(r["shelf"])


def _authors(add: Add, say: Say) -> None:
    """Who wrote a title; the books of an author."""
    for i, title in enumerate(("Dune", "Emma", "Dracula", "Cosmos", "The Hobbit", "Frankenstein", "Neuromancer")):
        s = add(f"who-wrote-{title.lower().replace(' ', '-')}", say(i, ("Who wrote {t}?", "Which author wrote {t}?",
                                                                        "Tell me who wrote {t}."), t=title))
        r = s.call("search_catalog", {"query": title}, f"I search the catalog for {title}.")
        hit = next(h for h in r["results"] if h["title"] == title)
        s.answer = f"{title} was written by {hit['author']} ({hit['year']})."
        s.check_answer(hit["author"].split()[-1])
    for i, author in enumerate(("Jane Austen", "George Orwell", "Agatha Christie", "Ursula K. Le Guin")):
        s = add(f"author-{author.split()[-1].lower()}", say(i, ("Which books by {a} does the library have?",
                                                                "What does the library have by {a}?",
                                                                "List the books written by {a}."), a=author))
        r = s.call("list_books", {"author": author.split()[-1]}, f"I list the books by {author}.")
        titles = [b["title"] for b in r["books"]]
        s.answer = f"The library has {len(titles)} book(s) by {author}: {', '.join(titles)}."
        s.check_answer(*titles[:2])


def _genres(add: Add, say: Say) -> None:
    """Books of a genre, with filters."""
    for genre, extra, ask in (("fantasy", {"available_only": True}, "List the fantasy books with a copy available now."),
                              ("horror", {}, "Which horror books are in the catalog?"),
                              ("science", {"year_from": 1970}, "Which science books came out in 1970 or later?"),
                              ("classic", {"year_to": 1830}, "Which classics were published before 1831?"),
                              ("memoir", {}, "What memoirs does the library have?"),
                              ("science-fiction", {"year_from": 1960}, "Which science-fiction books are from 1960 or later?"),
                              ("mystery", {"year_to": 1934}, "Which mystery books in the catalog came out before 1935?"),
                              ("fiction", {"year_to": 1959}, "Which fiction books date from before 1960?"),
                              ("science", {"year_to": 1969}, "List the science books published before 1970.")):
        s = add(f"genre-{genre}-{'-'.join(k.split('_')[-1] for k in extra) or 'all'}", ask)
        r = s.call("list_books", {"genre": genre, **extra}, f"I list the {genre} books with the filters asked for.")
        titles = [b["title"] for b in r["books"]]
        s.answer = f"{', '.join(titles)}." if titles else "None found."
        s.check_call("list_books", {"genre": genre, **extra})
        s.check_answer(*titles[:2])


def _wrong_ids(add: Add, say: Say) -> None:
    """An id the catalog lacks, then the search by title."""
    # A request with an id the catalog does not have (the catalog ends at BK-041): get_book
    # answers BOOK_NOT_FOUND in every world, then the catalog search finds the book. (A title
    # passed as the id never reaches the rehearser: it fails the id's pattern, and the engine
    # writes that refusal itself.)
    for i, (title, wrong) in enumerate((("Dune", "BK-050"), ("Emma", "BK-042"), ("Cosmos", "BK-073"),
                                        ("The Hobbit", "BK-099"), ("Beloved", "BK-045"), ("Dracula", "BK-061"),
                                        ("Foundation", "BK-088"))):
        s = add(f"wrong-id-{title.lower().replace(' ', '-')}", say(i, (
            "Is {t} ({b}) available to borrow right now?", "Can I borrow {t}, book {b}, today?",
            "How many copies of {t} ({b}) are on the shelf?"), t=title, b=wrong))
        r = s.call("get_book", {"book_id": wrong}, f"I look up {wrong}.")
        assert error(r)["code"] == "BOOK_NOT_FOUND"
        r = s.call("search_catalog", {"query": title}, f"There is no {wrong}; I search the catalog for {title}.")
        hit = next(h for h in r["results"] if h["title"] == title)
        n = hit["available"]
        s.answer = (f"There is no book {wrong}; {title} is {hit['book_id']}, and "
                    + (f"{n} cop{'y is' if n == 1 else 'ies are'} available now." if n else "no copy is available now."))
        s.check_call("search_catalog", {"query": title})
        s.check_answer(hit["book_id"])


def _holds(add: Add, say: Say, env_books: dict) -> None:
    """Holds: placed, a queue, already held, or at the limit."""
    # Holds: on books with no copy on the shelf (still placed: a queue), on books the patron
    # holds already (ALREADY_ON_HOLD comes before the limit), for the patron at the limit.
    for i, (book_id, patron) in enumerate((("BK-003", "P-1042"), ("BK-012", "P-1100"), ("BK-029", "P-1042"),
                                           ("BK-009", "P-1100"), ("BK-038", "P-1042"), ("BK-008", "P-1042"),
                                           ("BK-020", "P-1100"), ("BK-033", "P-1100"), ("BK-001", "P-1042"),
                                           ("BK-018", "P-1100"), ("BK-014", "P-1042"), ("BK-020", "P-1077"),
                                           ("BK-001", "P-1077"))):
        s = add(f"hold-{book_id}-{patron}", say(i, ("Place a hold on book {b} for library card {p}.",
                                                   "Hold {t} ({b}) for patron {p}.",
                                                   "Reserve {t} ({b}) for {p}, please."),
                                               b=book_id, p=patron, t=env_books[book_id]["title"]))
        _hold(s, book_id, patron)


def _hold(s: Script, book_id: str, patron: str, thought: str | None = None) -> None:
    """The hold call and its answer, whichever outcome the world gives."""
    r = s.call("place_hold", {"book_id": book_id, "patron_id": patron},
               thought or f"I place the hold on {book_id} for {patron}.")
    err = error(r)
    if err is None:
        s.answer = f"Hold placed on {r['title']} for {patron}; queue position {r['queue_position']}."
    elif err["code"] == "ALREADY_ON_HOLD":
        s.answer = f"{patron} already has a hold on {book_id}."
    elif err["code"] == "HOLD_LIMIT_REACHED":
        s.answer = f"I could not place the hold, {patron} is at the hold limit: {err['message']}."
    else:
        s.answer = f"I could not place the hold: {err['message']}."
    s.check_state("patrons", patron, "holds")
    if err:
        s.check_call("place_hold", {"book_id": book_id, "patron_id": patron})
        s.check_answer("already" if err["code"] == "ALREADY_ON_HOLD" else "limit")


def _limit_and_title_holds(add: Add, say: Say, env_books: dict) -> None:
    """Holds for a patron at the limit; holds by title."""
    # P-1077 holds three books in the seeded world: any other hold of theirs is refused there,
    # whatever the book (a varied world may leave them room).
    for i, book_id in enumerate(("BK-002", "BK-016", "BK-028", "BK-011", "BK-035", "BK-038", "BK-006", "BK-024",
                                 "BK-039", "BK-014")):
        s = add(f"hold-limit-{book_id}", say(i, ("Put a hold on book {b} for patron P-1077.",
                                                 "Reserve {t} ({b}) for card P-1077.",
                                                 "Patron P-1077 would like to reserve {t} ({b})."),
                                             b=book_id, t=env_books[book_id]["title"]))
        _hold(s, book_id, "P-1077")
    # A hold named by title: the id comes from the catalog, never from a guess (a guessed
    # id that exists is another book, and no rehearsal can tell).
    for i, (title, patron) in enumerate((("Foundation", "P-1042"), ("Emma", "P-1100"), ("Dracula", "P-1042"),
                                         ("The Hobbit", "P-1100"), ("Moby-Dick", "P-1042"), ("Beloved", "P-1100"),
                                         ("The Road", "P-1042"), ("Jane Eyre", "P-1100"))):
        s = add(f"hold-title-{title.lower().replace(' ', '-')}-{patron}", say(i, (
            "My card is {p}. Please put a hold on {t} for me.", "Reserve {t} for patron {p}.",
            "Could you place a hold on the book {t}? My card number is {p}."), t=title, p=patron))
        r = s.call("search_catalog", {"query": title}, f"I need the id of {title} first.")
        book_id = next(h["book_id"] for h in r["results"] if h["title"] == title)
        # The answer follows the hold's result: a world may have the patron at the limit,
        # or holding the book already (an answer of "placed" there would teach a false one).
        _hold(s, book_id, patron, f"{title} is {book_id}; I place the hold.")


def _oldest_and_newest(add: Add, say: Say) -> None:
    """The oldest or newest book of a section: the section's books by year."""
    # Not science: a measuring set asks for its oldest book.
    for i, (genre, newest) in enumerate((("classic", False), ("fantasy", True), ("mystery", False),
                                         ("horror", True), ("memoir", False), ("science-fiction", True),
                                         ("fiction", False), ("history", True), ("classic", True),
                                         ("science-fiction", False))):
        word = "newest" if newest else "oldest"
        s = add(f"{word}-{genre}", say(i, ("What's the {w} book in the {g} section?",
                                           "Which {g} book is the {w} one you have?",
                                           "Of your {g} books, which is the {w}?"), w=word, g=genre))
        r = s.call("list_books", {"genre": genre, "sort_by": "year"}, f"I list the {genre} books by year.")
        books = r["books"]
        b = books[-1] if newest else books[0]
        s.answer = f"The {word} {genre} book is {b['title']} by {b['author']} ({b['year']})."
        s.check_answer(b["title"])


def _author_holds(add: Add, say: Say) -> None:
    """A hold on one of an author's books, chosen by what the list shows: a copy on the
    shelf now, or the most recent."""
    # Not Christie or Ishiguro: measuring sets ask for those.
    for i, (author, patron) in enumerate((("Orwell", "P-1042"), ("Austen", "P-1100"), ("Le Guin", "P-1042"),
                                          ("Bronte", "P-1100"), ("Orwell", "P-1100"), ("Austen", "P-1042"))):
        s = add(f"author-hold-shelf-{author.lower().replace(' ', '-')}-{patron}", say(i, (
            "Card {p} here. Please hold whichever {a} book has a copy on the shelf right now.",
            "I'd like any book by {a} that's on the shelf today; put it on hold for {p}.",
            "Hold one of {a}'s books that has a copy available now, card {p}."), a=author, p=patron))
        r = s.call("list_books", {"author": author, "available_only": True},
                   f"I list {author}'s books on the shelf now.")
        if not r["books"]:
            s.answer = f"No book by {author} has a copy on the shelf right now, so I placed no hold."
            s.check_state("patrons", patron, "holds")
            continue
        _hold(s, r["books"][0]["book_id"], patron)
    for i, (author, patron) in enumerate((("Orwell", "P-1042"), ("Austen", "P-1100"), ("Le Guin", "P-1100"),
                                          ("Bronte", "P-1042"))):
        s = add(f"author-hold-newest-{author.lower().replace(' ', '-')}-{patron}", say(i, (
            "Put a hold on the most recent {a} book you have, for card {p}.",
            "Reserve {a}'s newest book for {p}.", "For patron {p}: hold the latest book by {a}."),
            a=author, p=patron))
        r = s.call("list_books", {"author": author, "sort_by": "year"}, f"I list {author}'s books by year.")
        _hold(s, r["books"][-1]["book_id"], patron)


def _patron_holds(add: Add, say: Say) -> None:
    """What a patron holds, by title: the patron's record, then each book."""
    # Not P-1100: a measuring set asks what that patron holds.
    for i, patron in enumerate(("P-1077", "P-1042", "P-1077", "P-1042")):
        s = add(f"patron-holds-{patron}-{i}", say(i, ("What does {p} have on hold right now?",
                                                      "Which books is card {p} holding?",
                                                      "list the holds of patron {p}, titles please"), p=patron))
        r = s.call("get_patron", {"patron_id": patron}, f"I look up patron {patron}'s holds.")
        titles = [s.call("get_book", {"book_id": b}, f"I look up {b} for its title.")["title"] for b in r["holds"]]
        s.answer = (f"{r['name']} ({patron}) holds: {', '.join(titles)}." if titles
                    else f"{r['name']} ({patron}) holds no books right now.")
        s.check_answer(*(titles[:1] or ["no books"]))


def write(add: Add, say: Say) -> None:
    """Every library family, in order."""
    env_books = create("library").state()["books"]
    _books(add, say, env_books)
    _authors(add, say)
    _genres(add, say)
    _wrong_ids(add, say)
    _holds(add, say, env_books)
    _limit_and_title_holds(add, say, env_books)
    _shelf_marks(add, say)
    _oldest_and_newest(add, say)
    _author_holds(add, say)
    _patron_holds(add, say)
