"""What a request asks only under a condition, weighed against what the real reads returned.

"If Wuthering Heights has a copy on the shelf, just tell me its shelf mark; if not, put it on
hold": the small actor searched, saw a copy on the shelf, and placed the hold anyway. "My card
is P-1042. Do you have anything by Chinua Achebe? If so, put it on hold": it found the book and
answered its shelf. A conditional sentence is read as branches, each a condition and the action
to take where it holds or where it does not. The condition is weighed against the latest real
read of the thing it names (or of the last thing named before it): copies on the shelf, an amount
against a balance, a status, an empty folder, a search that found something. A write whose
branch the reads did not take is not made (``gated``: the turn leaves the actor's history and the
actor answers), nor any write where the taken branch only tells and the request orders nothing
else; a write the taken branch names and no call made is asked for (``demanded``, through
``engine/unmade.py``); a taken branch that asks to be told is the question (``told``). A write
whose condition a read could settle and none has gets the environment's reads for it first
(``unsettled``, ``condition_reads``). A condition the reads do not settle changes nothing."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from envace_demo.engine.imagined import ORDER_VERBS
from envace_demo.engine.offer import naming, words
from envace_demo.negation import wished
from envace_demo.record import ToolCall, is_error
from envace_demo.schemas import Tool

Writes = Callable[[str], "bool | None"]


@dataclass(frozen=True)
class Branch:
    """``action`` is asked where ``condition``'s truth is ``holds``; ``start``: where the condition begins."""

    condition: str
    holds: bool
    action: str
    start: int
    clause: str = ""  # the words the branch was read from


# A clause ends at ; ! ? a line's end, a full stop before a space (not a file name's dot), or
# before ", otherwise" ("if a copy is on the shelf I'll grab it, otherwise please hold it").
_CLAUSE = re.compile(r"(?:[^;.!?\n,]|\.(?=\S)|,(?!\s*(?:otherwise|else|if\s+not)\b))+[;.!?\n,]*")
# The other branch: "if not", "otherwise", "if it's not", "if it isn't", "if there isn't one".
_PRONOUN = r"(?:it|they|there|that|she|he|this)"
_ELSE = re.compile(rf"^\s*(?:and\s+|but\s+|or\s+)?(?:(?:if\s+not|otherwise|else|if\s+that\s+fails)\b[\s,]*"
                   rf"|if\s+{_PRONOUN}(?:'s|\s+(?:is|are|was|does|do|did|has|have))?\s*(?:not|n't)(?:\s+one)?\s*,\s*"
                   rf"|if\s+{_PRONOUN}\s+(?:isn't|aren't|wasn't|doesn't|don't|hasn't|haven't)(?:\s+one)?\s*,\s*)"
                   r"(?P<action>.*)$", re.I)
# "If so", "if it is": the condition is the question before it.
_SO = re.compile(rf"^\s*(?:and\s+)?if\s+(?:so|{_PRONOUN}(?:'s|\s+(?:is|are|was|were|does|do|did|has|have))?)"
                 r"\s*,\s*(?P<action>.*)$", re.I)
_IF = re.compile(r"\b(?P<word>only\s+if|if|unless)\s+(?P<condition>[^,]+?)\s*(?:,\s*(?:then\s+)?|\bthen\s+)(?P<action>.+)$", re.I)
_BARE = re.compile(r"^\s*(?:and\s+|but\s+|so\s+)?if\s+(?P<rest>.+)$", re.I)
_AFTER = re.compile(r"^(?P<action>.+?)[\s,]+(?:but\s+)?(?P<word>only\s+if|if|unless)\s+(?P<condition>.+)$", re.I)


def branches(request: str) -> list[Branch]:
    """The conditional branches of ``request``, in order."""
    out: list[Branch] = []
    before, before_at = "", 0  # the last clause before this one: what "if so" weighs
    for m in _CLAUSE.finditer(request):
        clause, at = m.group(0).rstrip(";.!?\n, "), m.start()
        if not clause.strip():
            continue
        if (e := _ELSE.match(clause)) and (out or before):
            # The other branch of the last condition, or "Is it frozen? If it isn't, ...".
            last = out[-1] if out else Branch(before, True, "", before_at)
            out.append(Branch(last.condition, not last.holds, e.group("action"), last.start, clause))
        elif (s := _SO.match(clause)) and before:
            out.append(Branch(before, True, s.group("action"), before_at, clause))
        elif i := _IF.search(clause):
            word = i.group("word").lower()
            out.append(Branch(i.group("condition"), word != "unless", i.group("action"), at + i.start("condition"),
                              clause))
        elif (bare := _BARE.match(clause)) is not None:
            # "if i've got at least $20 in there take out 20 in cash": no comma says where the
            # condition ends; the condition's words settle it, the action's name the write.
            out.append(Branch(bare.group("rest"), True, bare.group("rest"), at + bare.start("rest"), clause))
        elif a := _AFTER.match(clause):
            word = a.group("word").lower()
            out.append(Branch(a.group("condition"), word != "unless", a.group("action"), at + a.start("condition"),
                              clause))
        before, before_at = clause.strip(), at + len(clause) - len(clause.lstrip())
    return out


# -- the reads a condition is weighed against ------------------------------------------------

def records(results: Iterable[tuple[ToolCall, Any]]) -> list[dict]:
    """Every object the real results hold, outermost first, in the order the calls were made."""
    out: list[dict] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            out.append(value)
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    for _, result in results:
        if not is_error(result):
            walk(result)
    return out


_NAMING_KEY = re.compile(r"(?:^|_)(?:id|title|name|path|query)$", re.I)


def _names(record: dict) -> list[str]:
    out = [v.lower() for k, v in record.items() if isinstance(v, str) and len(v) > 2 and _NAMING_KEY.search(k)]
    # A file is named by its folder too: "the stylesheet in /projects/website".
    return out + [p.rsplit("/", 1)[0] for p in out if p.startswith("/") and p.count("/") > 1]


def subject(request: str, branch: Branch, found: list[dict], before: list[dict] | None = None) -> list[dict]:
    """The records of the thing ``branch``'s condition names, else of the thing an earlier
    condition weighed (``before``: "if it's below $500 ...; if it's $500 or more ..."), else of
    the last thing named before it; the latest read last."""
    text = request.lower()
    end = branch.start + len(branch.condition)
    named = [(max((text.rfind(n, 0, end) for n in _names(r)), default=-1), r) for r in found]
    inside = [r for at, r in named if at >= branch.start]
    if inside or before:
        return inside or before or []
    last = max((at for at, _ in named), default=-1)
    return [r for at, r in named if at == last] if last >= 0 else []


# -- the condition ---------------------------------------------------------------------------

_NOT = re.compile(r"\b(?:not|never)\b|n['\u2019]t\b", re.I)
_OUT = re.compile(r"\b(?:(?<!maxed\s)out|checked\s+out|unavailable|no\s+cop(?:y|ies)|none)\b", re.I)
_IN = re.compile(r"\b(?:on\s+the\s+shelf|available|in\s+stock|cop(?:y|ies)\s+in|(?:it|is|are|it's|its)\s+in)\b", re.I)
_FOUND = re.compile(r"\b(?:do\s+you\s+have|have\s+you\s+got|is\s+there|are\s+there|any(?:thing)?|find)\b", re.I)
_EMPTY = re.compile(r"\bempty\b", re.I)
# A list at its limit: "if i've maxed out my holds", "if she's at the limit".
_FULL = re.compile(r"\b(?:maxed\s+out|max(?:ed)?|at\s+(?:the|my|her|his|their)\s+(?:limit|max(?:imum)?)"
                   r"|(?:reached|hit)\s+(?:\w+\s+){0,3}?(?:limit|max(?:imum)?)|full|no\s+more\s+room)\b", re.I)
_LESS = r"below|under|less\s+than|lower\s+than|fewer\s+than|at\s+most|no\s+more\s+than"
_MORE = r"over|above|more\s+than|greater\s+than|higher\s+than|at\s+least|no\s+less\s+than"
_AMOUNT = r"\$?\s*(?P<{}>\d[\d,]*(?:\.\d+)?)"
_COMPARE = re.compile(rf"\b(?P<op>{_LESS}|{_MORE})\s+{_AMOUNT.format('n')}"
                      rf"|{_AMOUNT.format('m')}\s*(?:usd|dollars)?\s+or\s+(?P<post>more|less|over|under|above|below)\b", re.I)
_ENOUGH = re.compile(r"\benough\b|\bsufficient\b|\b(?:can|could)(?:n['\u2019]t|not)?\s+(?:cover|afford)\b", re.I)
_SUM = re.compile(r"\$\s*(\d[\d,]*(?:\.\d+)?)|\b(\d[\d,]*(?:\.\d+)?)\s*(?:dollars|usd)\b", re.I)
_BYTES = re.compile(r"\bbytes?\b", re.I)
_AFTER_WRITE = re.compile(r"\b(?:would|will)\s+(?:leave|bring|drop|put|take)\b|\bafter\b", re.I)


def weigh(condition: str, found: list[dict], amount: float | None = None) -> bool | None:
    """Whether ``condition`` holds of the latest of ``found`` that settles it; None where none does.
    ``amount``: the write's own, taken off a balance the condition weighs after the write."""
    for record in reversed(found):
        truth = _weigh_one(condition, record, amount)
        if truth is not None:
            return truth
    return None


def _weigh_one(condition: str, record: dict, amount: float | None) -> bool | None:
    negated = bool(_NOT.search(condition))
    if _FULL.search(condition):
        lists = [v for v in record.values() if isinstance(v, list)]
        limits = [v for k, v in record.items() if "limit" in k.lower() and isinstance(v, int) and not isinstance(v, bool)]
        if len(lists) == 1 and len(limits) == 1:
            return (len(lists[0]) >= limits[0]) != negated
    available = next((v for k, v in record.items() if "avail" in k.lower() and isinstance(v, (int, float))), None)
    if available is not None and (_OUT.search(condition) or _IN.search(condition)):
        # "no copy on the shelf" is out, whatever else it says: its negation is in its words
        return available == 0 if _OUT.search(condition) else (available > 0) != negated
    if (c := _COMPARE.search(condition)) and (value := _quantity(condition, record)) is not None:
        if amount is not None and _AFTER_WRITE.search(condition):
            value -= amount
        n = float((c.group("n") or c.group("m")).replace(",", ""))
        op = (c.group("op") or c.group("post")).lower()
        less = bool(re.fullmatch(_LESS, op, re.I)) or op in ("less", "under", "below")
        inclusive = op.startswith(("at ", "no ")) or bool(c.group("post"))
        return ((value <= n if inclusive else value < n) if less else (value >= n if inclusive else value > n)) != negated
    if _ENOUGH.search(condition) and amount is not None and (value := _quantity(condition, record)) is not None:
        return (value >= amount) != negated  # "if there isn't enough in the account for that"
    if _EMPTY.search(condition):
        lists = [v for v in record.values() if isinstance(v, list)]
        if lists:
            return (not any(lists)) != negated
    status = record.get("status")
    if isinstance(status, str) and status and re.search(rf"\b{re.escape(status)}\b", condition, re.I):
        return not negated
    if _FOUND.search(condition) and isinstance(record.get("total"), int):
        return (record["total"] > 0) != negated
    return None


def sums(text: str) -> list[float]:
    """The sums of money ``text`` says ("$400", "250 dollars"), in order."""
    return [float((m.group(1) or m.group(2)).replace(",", "")) for m in _SUM.finditer(text)]


def _quantity(condition: str, record: dict) -> float | None:
    """The number of ``record`` the condition compares: a field it names, else its balance."""
    said = words(condition) | ({"size"} if _BYTES.search(condition) else set())  # a unit names what it measures
    numbers = {k: v for k, v in record.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    named = [v for k, v in numbers.items() if words(k.replace("_", " ")) & said]
    value = named[0] if len(named) == 1 else numbers.get("balance")
    return None if value is None else float(value)


# -- what the branches ask ------------------------------------------------------------------

_NO_WRITE = re.compile(r"\b(?:just\s+)?(?:tell|let\s+me\s+know|show|say|leave|skip|stop|do\s+nothing|nothing)\b", re.I)


_OPENS = re.compile(r"^\s*(?:(?:just|then|please|and|so)\s+)*", re.I)


def _asks_write(action: str) -> bool:
    """Whether a branch asks for something done, not only told or left as it is: "remind me which
    books I've got on hold" asks to be told, "put me on the waiting list" for a write."""
    wish = wished(action).strip()
    opening = wish[_OPENS.match(wish).end():]
    if not words(wish) or _NO_WRITE.match(opening) or _TELLS.match(opening):
        return False
    return True


def names(action: str, tool: Tool, tools: list[Tool], writes: Writes) -> bool:
    """Whether ``action`` asks for a call of the write ``tool``: a word of its name that names it
    alone (``offer.naming``: "hold", not "file"), or (where it is the only write on offer) any action."""
    if not _asks_write(action):
        return False
    if naming(tool, tools, writes) & words(wished(action)):
        return True
    return [t.name for t in tools if writes(t.name) is True] == [tool.name]


def taken(request: str, results: list[tuple[ToolCall, Any]], call: ToolCall | None = None) -> list[tuple[Branch, bool]]:
    """Each branch of ``request`` whose condition the reads settle, and whether it is taken."""
    found = records(results)
    amount = call.arguments.get("amount") if call is not None else None
    amount = float(amount) if isinstance(amount, (int, float)) and not isinstance(amount, bool) else None
    out, before = [], None
    for branch in branches(request):
        about = subject(request, branch, found, before)
        # "enough for that" weighs the amount asked for before the condition, not the fallback's own.
        said = sums(request[:branch.start])[:1] if _ENOUGH.search(branch.condition) else []
        truth = weigh(branch.condition, about, said[0] if said else amount)
        if truth is None and _FULL.search(branch.condition):  # "my holds": whoever's list has a limit
            truth = weigh(branch.condition, found, amount)
        if truth is not None:
            out.append((branch, truth == branch.holds))
        before = about or before
    return out


def gated(request: str, call: ToolCall, tools: list[Tool], writes: Writes,
          results: list[tuple[ToolCall, Any]]) -> Branch | None:
    """The branch not taken that asks for ``call`` (a write), where no taken branch asks for it;
    or, where the request orders nothing outside its branches, a taken branch that asks for no
    write at all ("otherwise don't touch anything and just tell me the balance"); None otherwise."""
    tool = next((t for t in tools if t.name == call.name), None)
    if tool is None or writes(call.name) is not True:
        return None
    weighed = taken(request, results, call)
    if any(ok and names(b.action, tool, tools, writes) for b, ok in weighed):
        return None
    if (branch := next((b for b, ok in weighed if not ok and names(b.action, tool, tools, writes)), None)) is not None:
        return branch
    if any(ok and _asks_write(b.action) for b, ok in weighed) or _orders_outside(request, [b for b, _ in weighed]):
        return None
    return next((b for b, ok in weighed if ok), None)


def unsettled(request: str, call: ToolCall, tools: list[Tool], writes: Writes,
              results: list[tuple[ToolCall, Any]]) -> bool:
    """Whether the request sets a condition on the write ``call`` that no read has settled yet."""
    if writes(call.name) is not True or not (every := branches(request)):
        return False
    settled = {b for b, _ in taken(request, results, call)}
    return any(b not in settled and _weighable(b.condition) for b in every)


def _weighable(condition: str) -> bool:
    """Whether a read could settle ``condition``: it speaks of what ``weigh`` reads (copies in or
    out, an amount, a list at its limit, an empty folder, something found), not "if there's
    already a file by that name", which only the write's own outcome tells."""
    return any(p.search(condition) for p in (_IN, _OUT, _COMPARE, _FULL, _EMPTY, _FOUND))


_ORDERS = re.compile(rf"\b{ORDER_VERBS}\b", re.I)


def _orders_outside(request: str, weighed: list[Branch]) -> bool:
    """Whether ``request`` orders something outside the clauses its branches were read from."""
    return bool(_ORDERS.search(wished(outside(request, weighed))))


def outside(request: str, weighed: list[Branch] | None = None) -> str:
    """``request`` less the clauses its branches (``weighed``, else all) were read from: what it
    asks whatever the reads say ("Tom wants a hold on Cosmos. If he can't get one, ...")."""
    rest = request
    for branch in branches(request) if weighed is None else weighed:
        rest = rest.replace(branch.clause, " ") if branch.clause else rest
    return rest


def demanded(request: str, tools: list[Tool], writes: Writes, results: list[tuple[ToolCall, Any]]) -> list[Tool]:
    """The write tools a taken branch asks for."""
    weighed = [b for b, ok in taken(request, results) if ok]
    return [t for t in tools if writes(t.name) is True and any(names(b.action, t, tools, writes) for b in weighed)]


_TELLS = re.compile(r"\b(?:tell|let\s+me\s+know|show|say|give\s+me|remind\s+me)\b", re.I)


def told(request: str, results: list[tuple[ToolCall, Any]]) -> str | None:
    """What a branch the reads took asks to be told, from its asking word on ("just tell me its
    shelf mark", "don't touch anything and just tell me what the balance is"), or None."""
    return next((b.action[m.start():] for b, ok in taken(request, results)
                 if ok and (m := _TELLS.search(b.action))), None)


def real_results(turns: Iterable[Any]) -> list[tuple[ToolCall | None, Any]]:
    """What ``turns``' calls returned for real: each call's response, and the reads made before it."""
    out: list[tuple[ToolCall | None, Any]] = []
    for turn in turns:
        for step in turn.calls:
            out += [(None, c.get("result")) for c in step.context or [] if isinstance(c, dict)]
            if step.real is not None and not step.held:
                out.append((step.call, step.real))
    return out


def condition_reads(environment: Any, call: ToolCall, turns: Iterable[Any]) -> list[ToolCall]:
    """The reads the environment names for the write ``call`` (``Environment.context_reads``)
    that no call of ``turns`` made."""
    if environment is None:
        return []
    try:
        reads = [ToolCall(name, args) for name, args in environment.context_reads(call.name, call.arguments)]
    except Exception:  # noqa: BLE001 - a read to settle a condition is a help, never a reason to fail
        return []
    made = {s.call.key() for t in turns for s in t.calls}
    return [r for r in reads if r.key() not in made]
