"""Grading an answer of ``tether eval`` by the facts it states, task by task
(:mod:`tether.demo.evaluate` runs the tasks and tables the grades).

Grading is by facts, not keywords: each task's rubric lists the facts a right answer
states and the claims that make it wrong, and each grade says which in words (the
table's ``why``). The sample workspace has four files: ``access.log``, ``errors.log``
(987 bytes, the largest; worker 7 timed out), ``notes.txt`` ("Remember to rotate your
logs.") and ``secrets.env``, which ``list_files`` lists "(not readable)" and no tool reads.

* *timeout*: says errors.log mentions a timeout (or only names it); no other file, no
  "no file does", no "errors.log does not".
* *count*: states 4 as the number of files (secrets.env is in the directory); any other
  number of files is wrong ("there are 3"), and so is a wrong qualified count ("2
  readable files": 3 are readable, 1 is not, 2 are logs, 1 is text). Numbers in words count.
* *notes*: says notes.txt says to rotate your logs; not that it says not to, is empty or
  unreadable, or says what another file says (a timeout, requests, a key).
* *list and read each*: reports something each readable file says, under its name, and
  lists secrets.env; no readable file called empty or unreadable, or given another's lines.
* *largest*: says errors.log is the largest (or only names it); no other file, nor several,
  as the largest ("the second largest" is not "the largest").
* *rotating*: yes, notes.txt (or notes.txt said to be about rotating logs); no "No", no
  "there is none", no other file as about rotating logs (errors.log may come along: its
  rotate-logs job did fail).

Grading is by what the answer asserts, not by the words it holds. A question asserts
nothing ("Is errors.log the largest?"); a retraction ("just kidding", "I lied", "scratch
that", "actually", "Wrong.") takes back all that came before it, so "There are 4 files. Just
kidding: five." asserts five; a negation ("not", "no file", "nothing", "it is incorrect
that") turns a claim into a denial; and a right file, or number, named alongside a wrong
one ("errors.log, or maybe access.log", "4 files, or maybe 5") makes the answer wrong.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

# ---- grading ---------------------------------------------------------------------
#
# Each task has a rubric: the facts a right answer must state and the claims it must not
# make, as data (RUBRICS, at the end), over one small reading of the answer, in three steps:
#
# 1. What the answer asserts (``asserted``): its sentences, less its questions and all that
#    comes before its last retraction ("just kidding", "I lied", "Wrong.", "Actually, ...").
#    A sentence that only names files or a number ("Also access.log.", "Or five.") goes on
#    the sentence before it: it is one more candidate for the same claim.
# 2. Sentence by sentence and clause by clause, what each clause says (a regex: "a
#    timeout", "the largest") of the sample files it names. Names listed around a claim,
#    hedged or not ("errors.log, or maybe access.log"; "and so does access.log"), are all
#    candidates for it, so naming a wrong one with the right one is a false claim.
# 3. Whether the clause denies it: a negation before the end of the claim ("not", "no",
#    "n't", "never", "nothing", "it is incorrect that", "smaller"...) makes it a denial.
#
# It is no parser: what it does not understand, it does not credit.

SAMPLE_FILES = ("access.log", "errors.log", "notes.txt", "secrets.env")
READABLE = ("access.log", "errors.log", "notes.txt")  # list_files shows secrets.env "(not readable)"
_STEMS = {"access": "access", "errors": "errors?", "notes": "notes?", "secrets": "secrets?"}


def _file_pattern(name: str) -> re.Pattern[str]:
    """``errors.log`` (any case), also ``errors log``, ``the error log``, ``the errors file``;
    never the bare stem ("errors" is a word)."""
    stem, ext = name.split(".")
    return re.compile(rf"(?<![\w.-]){_STEMS[stem]}(?:\.{ext}\b|[ _-]{ext}\b|\s+file\b)")


FILE_NAMES = {name: _file_pattern(name) for name in SAMPLE_FILES}
_BLANK = "§"  # stands in for a file name once found: no word ("errors.log" holds no "errors"), no space

NEGATION = re.compile(r"\b(?:not|no|never|none|nothing|neither|nor|without|cannot|instead|smaller|smallest|less"
                      r"|fewer|isnt|doesnt|dont|didnt|cant|wont|arent|nobody|nowhere|hardly|doubt|doubtful"
                      r"|unlikely|incorrect|untrue|false|falsely)\b|n't\b"
                      # "it is wrong that ..." denies; "what went wrong" does not
                      r"|\b(?:wrong|a lie|mistaken)\s+(?:that|to say)\b")
_CONNECTIVES = "and|or|nor|but|except|while|whereas|although|though|however|than|which|who|because"
_CLAUSE_BREAK = re.compile(rf"\s*(?:[,()\[\]]|\s[-–—]\s|—)\s*(?:({_CONNECTIVES})\b)?|\s+({_CONNECTIVES})\b")
_SENTENCE_BREAK = re.compile(r"(?<=[.!?;])\s+|\s*\n\s*")
_HEDGE = re.compile(r"\b(?:maybe|perhaps|possibly|probably)\b")
# Around a list of names: "both ...", "also ...", "... too", "or maybe ...", "and so does ...", "as well as ...".
_FILLER = re.compile(rf"\b(?:the|a|an|both|either|only|just|also|files?|too|even|as|well|so|does|do|is|are"
                     rf"|likewise)\b|{_HEDGE.pattern}|\W")
# Words that leave an answer only a file's name: "It's errors.log.", "errors.log does.", "errors.log (987 bytes)."
_BARE = re.compile(r"\b(?:the|answer|is|it's|its|it|that's|that|there's|there|file|yes|does|at|\d+ bytes)\b|\W")
_OTHER = re.compile(r"\b(?:other|others|else|rest)\b")  # "no other file does": not about the answer's file
_NO_FILE = re.compile(r"\b(?:no|none of the|not any|neither)\s+(?:\w+\s+)?files?\b|\bnone\b")  # of all files at once

NUMBER_WORDS = {"zero": 0, "one": 1, "single": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
                "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12}
_NUM = r"(\d+|" + "|".join(NUMBER_WORDS) + r")"
_ENDS_COUNT = (r"(?=\s*(?:$|[^\w\s-]"
               r"|(?:in total|in all|altogether|total|overall|in the (?:directory|folder|workspace))\b))")
# "4 files", "four readable files", "2 .log files" ...
_COUNT_OF_FILES = re.compile(rf"\b{_NUM}\s+((?:[a-z.-]+\s+){{0,2}}?)files?\b")
# ... "there are 4.", "the directory has four", "a total of 4", "4 in total" ...
_COUNT_STATED = re.compile(r"(?:\bthere(?:'s| is| are|'re| were)|\b(?:directory|folder|workspace|it) (?:has"
                           r"|contains|holds|lists|shows|includes)|\btotal(?: of| is|:)?|\bcount(?: is|:)?"
                           rf"|\bnumber of files(?: is|:)?|\banswer(?: is|:)?)\W{{0,3}}{_NUM}\b{_ENDS_COUNT}"
                           rf"|\b{_NUM}\s+(?:in total|in all|altogether)\b")
_COUNT_ALONE = re.compile(rf"\W*{_NUM}(?:\s+files?)?\W*")  # ... and "4." / "Four files."
# What a qualified count counts ("3 readable files", "2 log files"); unknown words count all files.
COUNT_QUALIFIERS = (
    ("unreadable", re.compile(r"unreadable|not readable|n't readable|(?:cannot|can't|couldn't|could not) be read"
                              r"|forbidden|refused|denied|protected|secret|hidden|\.?env\b")),
    ("readable", re.compile(r"readable|\bread\b|accessible|opened")),
    ("log", re.compile(r"\.?\blogs?\b")),
    ("text", re.compile(r"\.?\bte?xt\b")),
)
_BOUND = re.compile(r"\b(?:at least|at most|more than|over|under|up to|nearly|almost)\s*$")  # "at least 4" is no 4
_NOT_A_COUNT = re.compile(r"\b(?:of|other|more|additional|remaining|else|the|such|these|those|than)\b")
_TOTAL = re.compile(r"\bthere\b|\b(?:has|have|contains|holds|lists|found)\b")


def _number(word: str) -> int:
    return int(word) if word.isdigit() else NUMBER_WORDS[word]


def _normal(answer: str) -> str:
    """Lower case, no markdown emphasis or double quotes, and "the second largest" is not "the largest"."""
    text = re.sub(r"[*`\"“”]", "", answer.lower().replace("’", "'"))
    return re.sub(r"\b(?:second|third|next|2nd|3rd)[\s-]+(?:largest|biggest)\b", "runner-up", text)


# ---- 1. what an answer asserts ----

# Takes back all that came before it, wherever it stands ("..., I lied, ...", "which is wrong") ...
_TAKING_BACK = (
    r"(?:just |only )?kidding|jk|j/k|psych|april fools?|wrong answer|or so i thought|not really",
    r"i (?:lied|was lying|was wrong|am wrong|'m wrong|misspoke|made (?:that|it) up|stand corrected"
    r"|take (?:that|it) back)",
    r"(?:scratch|strike|cancel|forget|ignore|disregard) (?:that|this|it|the above|what i (?:just )?said)",
    r"no,? wait|never ?mind|on second thought|my (?:mistake|bad)|none of (?:that|this|it) is true",
    r"(?:that|this|which|it)(?:'s| is| was) (?:not (?:true|right|correct|so|the case)|untrue|false|wrong|incorrect"
    r"|a lie|a joke)(?!\s+(?:that|to say)\b)",  # "it is false that ..." is a negation instead
    r"(?:that|this|which|it)(?:'s| is| was| does| did)(?:n't| not)(?=\W*$)",  # "..., it isn't."
    r"or not(?=\W*$)|or (?:is|does|did|was|are|do) (?:it|that|this|they|there)",  # "... Or is it?"
)
RETRACTION = re.compile(r"\b(?P<words>" + "|".join(_TAKING_BACK) + r")\b")
# ... and so do these words where a clause starts: "Wrong.", "No, 3.", "Not!", "Actually, ...", "Correction: ...".
VERDICT = re.compile(
    r"(?:^|[,(\[]|\s[-–—]\s|[—–]|\b(?:but|and|or)\b|:(?=\s*(?:wrong|false|incorrect|untrue)\b))\s*"
    r"(?P<words>actually|correction|rather(?! than)"
    r"|(?:no|nope|nah|not|wait|wrong|false|incorrect|untrue)(?=\s*(?:[.!,:)\]—–]|\s-\s|$)))\b")
_WORD = re.compile(r"\w")


def _last_retraction(sentence: str, answering: bool) -> re.Match[str] | None:
    """The last retraction in the sentence. A verdict opening a sentence that follows a
    question answers that question ("Any other file? No.") and takes nothing back."""
    marks = [*RETRACTION.finditer(sentence),
             *(m for m in VERDICT.finditer(sentence) if not (answering and m.start() == 0))]
    return max(marks, key=lambda m: m.end(), default=None)


def asserted(text: str) -> tuple[list[str], str | None]:
    """The sentences of ``text`` (normalised) that assert something, and the words of the
    retraction that took back the rest (None if none did).

    Grading goes by what an answer asserts, not by the words it holds: a question asserts
    nothing ("Is errors.log the largest?"), and a retraction takes back all said before it
    ("There are 4 files. Just kidding: five." asserts five). Only what was said can be taken
    back: "No. notes.txt says..." opens with its answer, "No", which stays."""
    sentences: list[str] = []
    taken_back: str | None = None
    after_question = False
    for sentence in (s.strip() for s in _SENTENCE_BREAK.split(text)):
        mark = _last_retraction(sentence, after_question)
        if mark is not None and (sentences or _WORD.search(sentence[:mark.start()])):
            sentences, taken_back = [], mark.group("words")
            sentence = sentence[mark.end():].lstrip(" ,:;!.)]–—-")
        after_question = sentence.rstrip(" )]'").endswith("?")
        if _WORD.search(sentence) and not after_question:
            sentences.append(sentence)
    return sentences, taken_back


# ---- 2. what each clause says of which files, and 3. whether it denies it ----

@dataclass
class _Clause:
    start: int
    end: int
    files: list[str]          # the sample files it is about
    after_than: bool = False  # "... than access.log": a yardstick, not what is said
    word: str = ""            # the connective or mark before it ("or", ",", "(")


class _Sentence:
    def __init__(self, text: str) -> None:
        self.text = text
        self.mentions = sorted((m.start(), m.end(), name) for name, pattern in FILE_NAMES.items()
                               for m in pattern.finditer(text))
        blank = list(text)
        for start, end, _ in self.mentions:
            blank[start:end] = _BLANK * (end - start)
        self.blank = "".join(blank)
        self.clauses = self._clauses()
        self.files = list(dict.fromkeys(f for c in self.clauses for f in c.files))
        self.positive = [f for c in self.clauses if not self.negated(c) for f in c.files]
        words = [w for w in _FILLER.sub(" ", self.blank).split() if w not in ("and", "or")]
        # "Also access.log.", "Or five.": names or numbers only, for the claim before them
        self.elliptic = bool(self.mentions or words) and all(re.fullmatch(_NUM, w) for w in words)

    def _pieces(self) -> list[tuple[str, int, int]]:
        """(connective before it, start, end) of each stretch between clause breaks."""
        pieces, start, word = [], 0, ""
        for m in _CLAUSE_BREAK.finditer(self.blank):
            if m.start() > start:
                pieces.append((word, start, m.start()))
            word, start = m.group(1) or m.group(2) or m.group(0).strip(), m.end()
        if start < len(self.blank):
            pieces.append((word, start, len(self.blank)))
        return pieces

    def _clauses(self) -> list[_Clause]:
        """Clauses from pieces. A piece that only names files is no clause of its own: it joins
        the clause before it (", not access.log or notes.txt"), or the one after it at the start
        of a sentence or before "which" ("errors.log and access.log are the largest", "than
        errors.log, which is the largest"). A parenthesis that names no file is about the file
        just before it ("secrets.env (not readable)"). Names after "than" are dropped."""
        pieces = self._pieces()
        clauses: list[_Clause] = []
        pending: _Clause | None = None
        compared = False
        for i, (word, start, end) in enumerate(pieces):
            names = [n for s, _, n in self.mentions if start <= s < end]
            list_only = bool(names) and not _FILLER.sub("", self.blank[start:end])
            compared = word == "than" or (list_only and word in ("and", "or", "nor") and compared)
            before_which = i + 1 < len(pieces) and pieces[i + 1][0] in ("which", "who")
            if list_only and clauses and pending is None and not before_which:
                clauses[-1].end = end
                clauses[-1].files += [] if compared else names
            elif list_only and i + 1 < len(pieces):
                pending = pending or _Clause(start, end, [], word=word)
                pending.end, pending.files = end, pending.files + names
            else:
                if word == "(" and not names:
                    if pending is not None:  # "Files: a, b (not readable)": the list is a clause of its own
                        clauses.append(pending)
                        pending = None
                    names = [n for _, e, n in self.mentions if e <= start][-1:]
                clause = _Clause(start, end, [] if compared else names, word == "than", word)
                if pending is not None:
                    clause.start, clause.files, pending = pending.start, pending.files + clause.files, None
                clauses.append(clause)
        return clauses

    def negated(self, clause: _Clause, claim: Sequence[tuple[int, int]] = (), upto: int | None = None) -> bool:
        """Whether the clause, up to ``upto`` (the end of the claim: "timed out with no response"
        denies nothing), holds a negation; the ``claim`` spans are none ("could not read" is a claim)."""
        text = list(self.blank[clause.start:clause.end if upto is None else min(upto, clause.end)])
        for start, end in claim:
            lo, hi = max(start - clause.start, 0), min(end - clause.start, len(text))
            text[lo:hi] = " " * max(hi - lo, 0)
        return NEGATION.search("".join(text)) is not None

    def clause_at(self, index: int) -> _Clause | None:
        return next((c for c in self.clauses if c.start <= index < c.end), None)

    def says(self, about: re.Pattern[str], fallback: Sequence[str | None]) -> set[tuple[str | None, bool]]:
        """(file, denied) for each file this sentence says ``about`` of: the files named in the
        clause that says it, else those the sentence names, else (it names none: "It mentions a
        timeout.") ``fallback``."""
        hits = list(about.finditer(self.blank))
        spans = [m.span() for m in hits]
        found: set[tuple[str | None, bool]] = set()
        for hit in hits:
            clause = self.clause_at(hit.start())
            if clause is None:
                continue
            named_to = max([hit.end(), *(e for s, e, _ in self.mentions if clause.start <= s < clause.end)])
            denied = self.negated(clause, spans, named_to)
            if clause.files:
                found |= {(f, denied) for f in clause.files}
            elif self.files:
                found |= {(f, denied or self.negated(c, spans)) for c in self.clauses for f in c.files}
            elif _OTHER.search(self.blank):
                continue
            elif _NO_FILE.search(self.blank[clause.start:clause.end]):
                found.add((None, denied))
            else:
                found |= {(f, denied) for f in fallback}
        return found

    def counts(self) -> list[tuple[int, str | None]]:
        """(n, what it counts: None for all files) for each count of files the sentence states."""
        stated: dict[int, tuple[int, str | None]] = {}
        for m in _COUNT_OF_FILES.finditer(self.blank):
            clause, between = self.clause_at(m.start()), m.group(2)
            if (clause is None or clause.after_than or self.negated(clause, upto=m.end())
                    or _NOT_A_COUNT.search(between) or _BOUND.search(self.blank[clause.start:m.start()])):
                continue
            n, after = _number(m.group(1)), " ".join(self.blank[m.end():clause.end].split()[:4])
            kind = next((k for k, p in COUNT_QUALIFIERS if p.search(between)), None)
            if kind is None and re.search(r"readable|\bbe read\b", after):  # "3 files are readable"
                kind = "unreadable" if COUNT_QUALIFIERS[0][1].search(after) else "readable"
            if kind is None and self.blank[clause.start:m.start()].split()[-1:] in (["read"], ["opened"]):
                kind = "readable"  # "I read 3 files"
            if (kind is None and len(set(clause.files)) == n != TRUE_COUNTS[None]
                    and not _TOTAL.search(self.blank[clause.start:m.start()])):
                continue  # "one file (secrets.env) is not readable": a count of the files it names
            stated[m.start(1)] = (n, kind)
        for m in _COUNT_STATED.finditer(self.blank):
            group = 1 if m.group(1) else 2
            clause = self.clause_at(m.start())
            if (clause is not None and not clause.after_than and not self.negated(clause, upto=m.end())
                    and m.start(group) not in stated):
                stated[m.start(group)] = (_number(m.group(group)), None)
        for clause in self.clauses:  # "4 files, or maybe 5": a second candidate count, of the same files
            text = self.blank[clause.start:clause.end]
            words = _FILLER.sub(" ", text).split()
            before = [kind for at, (_, kind) in sorted(stated.items()) if at < clause.start]
            if (before and len(words) == 1 and re.fullmatch(_NUM, words[0])
                    and (clause.word == "or" or _HEDGE.search(text))):
                stated.setdefault(clause.start, (_number(words[0]), before[-1]))
        return list(stated.values())


def _continued(sentences: list[_Sentence]) -> list[_Sentence]:
    """Each sentence that only names files or numbers ("Also access.log.", "Or five.") joined
    to the one before it: it offers one more candidate for that sentence's claim."""
    joined: list[_Sentence] = []
    for sentence in sentences:
        if joined and sentence.elliptic:
            joined[-1] = _Sentence(f"{joined[-1].text.rstrip('.!')}, {sentence.text}")
        else:
            joined.append(sentence)
    return joined


class Answer:
    """An answer as the rubrics read it: what its asserting sentences say of which sample files."""

    def __init__(self, text: str, subject: str | None = None) -> None:
        sentences, self.taken_back = asserted(_normal(text).strip())
        self.sentences = _continued([_Sentence(s) for s in sentences])
        self.text = " ".join(s.text for s in self.sentences)
        self.subject = subject
        self.named = {n for s in self.sentences for _, _, n in s.mentions}
        rest = "".join(_BARE.sub("", s.blank) for s in self.sentences)
        self.bare = next(iter(self.named)) if len(self.named) == 1 and not rest else None  # only a file name
        first = re.match(r"\W*(\w+)", self.text)
        self.first_word = first.group(1) if first else ""

    def says(self, about: re.Pattern[str]) -> set[tuple[str | None, bool]]:
        """(file, denied) for each file the answer says ``about`` of. A sentence that names no
        file is about those the last sentence naming any named ("I read errors.log. It says..."),
        else about ``subject`` (the file the task is about), else about no file (None):
        "No file mentions a timeout." is (None, True)."""
        found: set[tuple[str | None, bool]] = set()
        earlier: list[str] = []
        for sentence in self.sentences:
            found |= sentence.says(about, earlier or [self.subject])
            if sentence.mentions:
                earlier = sentence.positive
        return found

    def counts(self) -> list[tuple[int, str | None]]:
        alone = _COUNT_ALONE.fullmatch(self.text)
        return [(_number(alone.group(1)), None)] if alone else [c for s in self.sentences for c in s.counts()]


# The matchers: each finds one fact or claim in an answer and returns it in words, or None.

@dataclass(frozen=True)
class Says:
    """A clause says ``about`` of ``file``, not denied. With ``bare``, an answer that is only the
    file's name says it too (it answers a "which file" question)."""

    file: str
    about: re.Pattern[str]
    fact: str
    bare: bool = False

    def find(self, answer: Answer) -> str | None:
        said = (self.bare and answer.bare == self.file) or (self.file, False) in answer.says(self.about)
        return self.fact if said else None


@dataclass(frozen=True)
class Denies:
    """A clause denies ``about`` of ``file``; of no file at all if ``file`` is None."""

    file: str | None
    about: re.Pattern[str]
    fact: str

    def find(self, answer: Answer) -> str | None:
        return self.fact if (self.file, True) in answer.says(self.about) else None


@dataclass(frozen=True)
class Names:
    """The answer names ``file``, in any way."""

    file: str
    fact: str

    def find(self, answer: Answer) -> str | None:
        return self.fact if self.file in answer.named else None


@dataclass(frozen=True)
class Opens:
    """The first word the answer asserts is ``word`` ("No.", also after a question: "Any? No.")."""

    word: str
    fact: str

    def find(self, answer: Answer) -> str | None:
        return self.fact if answer.first_word == self.word else None


@dataclass(frozen=True)
class Counts:
    """The answer states ``n`` as the number of files (unqualified: all of them)."""

    n: int
    fact: str

    def find(self, answer: Answer) -> str | None:
        return self.fact if (self.n, None) in answer.counts() else None


def _count_words(n: int, kind: str | None) -> str:
    return f"there {'is' if n == 1 else 'are'} {n} {kind + ' ' if kind else ''}file{'' if n == 1 else 's'}"


@dataclass(frozen=True)
class MisCounts:
    """The answer states a number of files other than the true one for what it counts."""

    true: Mapping[str | None, int]
    fact: str = "a wrong count"

    def find(self, answer: Answer) -> str | None:
        wrong = [_count_words(n, kind) for n, kind in answer.counts() if n != self.true[kind]]
        return "; ".join(dict.fromkeys(wrong)) or None


Matcher = Says | Denies | Names | Opens | Counts | MisCounts


@dataclass(frozen=True)
class Grade:
    right: bool
    why: str  # "says ...", or "missing: ...; false: ..."


@dataclass(frozen=True)
class Rubric:
    """What a right answer must state (all of it) and must not claim (any of it)."""

    must: tuple[Matcher, ...]
    must_not: tuple[Matcher, ...] = ()
    subject: str | None = None  # the file the task is about: "It says: ..." is about it

    def grade(self, text: str) -> Grade:
        answer = Answer(text, self.subject)
        found = [(m, m.find(answer)) for m in self.must]
        missing = [f"missing: {m.fact}" for m, said in found if said is None]
        false = [f"false: {claim}" for m in self.must_not if (claim := m.find(answer))]
        if missing or false:
            taken_back = [f'took back what it said before "{answer.taken_back}"'] if answer.taken_back else []
            return Grade(False, "; ".join(missing + false + taken_back))
        return Grade(True, "says " + "; ".join(said for _, said in found if said))


TIMEOUT = re.compile(r"\btim(?:e|es|ed|ing)[ -]?outs?\b")
LARGEST = re.compile(r"\b(?:largest|biggest)\b|\bmost bytes\b"
                     r"|\b(?:larger|bigger) than (?:all|any|every|each|the (?:other|rest))")
ROTATE = re.compile(r"\brotat")
ROTATE_LOGS = re.compile(r"\brotat(?:e|es|ed|ing|ion)\b(?:\W+\w+){0,3}?\W+logs?\b|\blogs?\W+(?:\w+\W+){0,2}?rotat")
ABOUT_ROTATING = re.compile(r"\brotat|\byes\b")  # "Yes, notes.txt." answers "Is there a file about rotating logs?"
UNAVAILABLE = re.compile(r"\b(?:is|was|looks|seems) (?:empty|blank)\b|\bempty\b|\b(?:says|contains|has|said) nothing\b"
                         r"|\bno (?:content|text)\b"
                         r"|\b(?:could(?:n't| not)|can(?:not|'t)|unable to) (?:be )?(?:read|open)|\bunreadable\b"
                         r"|\bnot readable\b|\bno such file\b|\bnot found\b|\bdoes(?:n't| not) exist\b"
                         r"|\bdenied\b|\brefused\b")
# What a reader of each readable file would report of it ...
CONTENT = {
    "errors.log": re.compile(r"\btim(?:e|es|ed|ing)[ -]?outs?\b|\bworker|\b502s?\b|bad gateway|\bsmtp\b|\bmail|\bdisk\b"
                             r"|/var/log|\bcapacity\b|\bscheduler\b|rotate-logs|\brestart|\bbatch\b|slow query"
                             r"|\btoken\b|\beviction|\bqueue\b|payments-gateway|\bwarn"),
    "access.log": re.compile(r"\bget\b|\bpost\b|/api|/health|http/1|\b10\.0\.\d|\bpayments\b|\borders\b"
                             r"|\b20[01]\b|\b502s?\b"),
    "notes.txt": ROTATE,
}
HOLDS = {"errors.log": "its errors (worker 7 timed out...)", "access.log": "its requests (GET /api/orders...)",
         "notes.txt": "its reminder to rotate logs"}
# ... and what only that file says: said of another file, it is a false claim.
ONLY_IN = {
    "errors.log": re.compile(r"\btim(?:e|es|ed|ing)[ -]?outs?\b|\bworker \d|\bsmtp\b|bad gateway|\bdisk\b|\bscheduler\b"
                             r"|\beviction|slow query"),
    "access.log": re.compile(r"\bget /|\bpost /|http/1|\b10\.0\.\d|/health"),
    "notes.txt": re.compile(r"\bremember\b|\brotate (?:your|the|all) logs"),
    "secrets.env": re.compile(r"\bapi[_ ]?key\b|sk-sample|\bcredential"),
}
# list_files lists four files, secrets.env "(not readable)": the directory holds 4 files.
TRUE_COUNTS: dict[str | None, int] = {None: 4, "readable": 3, "unreadable": 1, "log": 2, "text": 1}


def _of_others(file: str, about: re.Pattern[str], fact: str, but: tuple[str, ...] = ()) -> tuple[Says, ...]:
    """``about`` said of any other sample file (but ``but``): each a false claim."""
    return tuple(Says(f, about, fact.format(f)) for f in SAMPLE_FILES if f != file and f not in but)


RUBRICS = {
    "timeout": Rubric(
        must=(Says("errors.log", TIMEOUT, "errors.log mentions a timeout", bare=True),),
        must_not=(*_of_others("errors.log", TIMEOUT, "{} mentions a timeout"),
                  Denies("errors.log", TIMEOUT, "errors.log mentions no timeout"),
                  Denies(None, TIMEOUT, "no file mentions a timeout"))),
    "count": Rubric(
        must=(Counts(TRUE_COUNTS[None], _count_words(TRUE_COUNTS[None], None)),),
        must_not=(MisCounts(TRUE_COUNTS),)),
    "notes": Rubric(
        subject="notes.txt",
        must=(Says("notes.txt", ROTATE_LOGS, "notes.txt says to rotate your logs"),),
        must_not=(Denies("notes.txt", ROTATE, "notes.txt says not to rotate logs"),
                  Says("notes.txt", UNAVAILABLE, "notes.txt is empty or unreadable"),
                  *(Says("notes.txt", ONLY_IN[f], f"notes.txt says what {f} says") for f in SAMPLE_FILES
                    if f != "notes.txt"))),
    "list_and_read": Rubric(
        must=(*(Says(f, CONTENT[f], f"{f} holds {HOLDS[f]}") for f in READABLE),
              Names("secrets.env", "secrets.env is listed")),
        must_not=(*(Says(f, UNAVAILABLE, f"{f} is empty or unreadable") for f in READABLE),
                  *(Denies(f, ONLY_IN[f], f"{f} lacks {HOLDS[f]}") for f in READABLE),
                  *(Says(f, ONLY_IN[g], f"{f} holds what {g} says") for f in READABLE for g in SAMPLE_FILES
                    if g != f))),
    "largest": Rubric(
        must=(Says("errors.log", LARGEST, "errors.log is the largest", bare=True),),
        must_not=(*_of_others("errors.log", LARGEST, "{} is the largest"),
                  Denies("errors.log", LARGEST, "errors.log is not the largest"),
                  Denies(None, LARGEST, "no file is the largest"))),
    "rotating": Rubric(
        must=(Says("notes.txt", ABOUT_ROTATING, "notes.txt is about rotating logs", bare=True),),
        must_not=(Opens("no", "no, there is none"),
                  Denies(None, ROTATE, "no file is about rotating logs"),
                  Denies("notes.txt", ABOUT_ROTATING, "notes.txt is not about rotating logs"),
                  # errors.log may come along: its rotate-logs job really failed
                  *_of_others("notes.txt", ABOUT_ROTATING, "{} is about rotating logs", but=("errors.log",)))),
}
