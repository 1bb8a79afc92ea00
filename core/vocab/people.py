"""Who counts as a person when a call needs more than one.

A decision carries two words for who made it. The *name* is what the decider calls
themselves (``--as NAME``; by default user@host): free text, recorded and shown. The
*account* is what authenticated the decision, which the decider cannot choose: the web
login's user on the web page, the database role the process connected as on PostgreSQL,
the operating system's account on the file store
(:meth:`tether.store.protocol.Store.account`). For a call that needs two people, the
people are accounts: two approvals from one account are one person whatever names they
give, and a name already among the approvers is not another person either. Names and
accounts compare without regard to case, everywhere (``ana`` is ``ANA``).

Plain functions over names and accounts, so the loop, an ACP agent's requests, a
program's run and the queue workers refuse a repeat in the same words.
"""

from __future__ import annotations

from collections.abc import Sequence


def same(a: str | None, b: str | None) -> bool:
    """Whether two names (or two accounts) are the same person's: compared without case."""
    return a is not None and b is not None and a.casefold() == b.casefold()


def shown(name: str, account: str | None) -> str:
    """A decider as shown: the name, with the account that counts when the name does not
    already say it (``ana as root``; ``root@host`` is root's own name)."""
    if not account or same(name, account) or name.casefold().startswith(account.casefold() + "@"):
        return name
    return f"{name} as {account}"


def shown_all(names: Sequence[str], accounts: Sequence[str]) -> str:
    """The approvers of a call so far, each as :func:`shown` (``ana as root, bob``)."""
    return ", ".join(shown(name, account_at(accounts, i)) for i, name in enumerate(names))


def account_at(accounts: Sequence[str], i: int) -> str | None:
    """The account of the ``i``-th approver: None for an approval recorded before accounts
    were (its name is all there is to compare)."""
    return accounts[i] if i < len(accounts) and accounts[i] else None


def padded(names: Sequence[str], accounts: Sequence[str]) -> list[str]:
    """The account of each of ``names``, one for each (``""`` where none was recorded)."""
    return [account_at(accounts, i) or "" for i in range(len(names))]


def progress(needed: int, names: Sequence[str], accounts: Sequence[str]) -> str:
    """``1 of 2 approved (ana as root)``: how far a call that needs several people is."""
    words = f"{len(names)} of {needed} approved"
    return f"{words} ({shown_all(names, accounts)})" if names else words


def still_needed(needed: int, names: Sequence[str], accounts: Sequence[str]) -> str:
    """How far a call that needs several people is, and what it still waits for: ``1 of 2
    approved (ana): one more person must approve, from another account``."""
    left = needed - len(names)
    if left <= 0:
        return f"approved by {needed} people ({shown_all(names, accounts)})"
    if not names:
        return f"0 of {needed} approved: it needs {needed} different people, each from an account of their own"
    more = "one more person" if left == 1 else f"{left} more people"
    return f"{progress(needed, names, accounts)}: {more} must approve, from another account"


def repeat_words(tool: str, call_id: str, needed: int, names: Sequence[str], accounts: Sequence[str],
                 name: str, account: str | None) -> str | None:
    """Why an approval by ``name`` (authenticated as ``account``) cannot count as one more
    of the ``needed`` people of call ``call_id``, in words; None when it can."""
    so_far = f"{len(names)} of {needed} so far"
    for i, earlier in enumerate(names):
        earlier_account = account_at(accounts, i)
        if same(account, earlier_account) and not same(name, earlier):
            return (f"the account {account} has approved {tool} ({call_id}) already, as {earlier}: one account is "
                    f"one person, whatever name it gives, and the call needs {needed} different people ({so_far}); "
                    "the next approval must come from another account")
        if same(name, earlier) or same(account, earlier_account):
            return (f"{shown(earlier, earlier_account)} has approved {tool} ({call_id}) already: it needs "
                    f"{needed} different people ({so_far})")
    return None
