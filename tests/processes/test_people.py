"""Who counts as a person for a call that needs two, and how far such a call is (issue 37,
items 5 and 6), through the CLI on both stores.

A decision counts as the account that authenticated it: the operating system's on the file
store, the database role on PostgreSQL; ``--as`` is a name recorded beside it. So one shell
user cannot be both people of a call by giving two names (or one name in two cases), and a
second account completes it. Everywhere the call is shown, it says how far it is: ``1 of 2``.

The commands of the test's own account run by the CLI's main in this process
(tests/support.py, cli_here); the run that waits is a real ``tether`` process; the second
account is a child process as another operating-system account, or a second database role
(tests/accounts.py).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tether.vocab.state import NeedsApproval, Status
from tests import accounts
from tests.processes.test_approvals_processes import Where, decide
from tests.processes.test_approvals_processes import where  # noqa: F401  (a fixture: both stores)
from tests.processes.test_control import CAP_S, spawn
from tests.support import exited


async def test_one_account_is_one_person_whatever_name_it_gives(where: Where):
    """The first approval is recorded and shown as 1 of 2 by approve, show, decisions and
    rules explain; the same account again, as ANA or as bob, is refused in words and nothing
    changes; decisions --by matches a name whatever its case."""
    me = accounts.me(where.store_args[1])  # root on the file store, the role "tether" on PostgreSQL
    code, _, err = await decide("rules", "add", "--ask", "delete_file", "--approvals", "2", "--reason", "two people",
                                *where.store_args)
    assert code == 0, err
    code, _, err = await decide("run", "destructive", "--run-id", "p1", *where.args)
    assert code == 5, err  # waiting for approval; no process holds it

    how_far = f"1 of 2 approved (ana as {me}): one more person must approve, from another account"
    code, out, err = await decide("approve", "p1", "--as", "ana", *where.store_args)
    assert code == 5 and how_far in out, (out, err)  # the call waits on: approve's own reply says how far
    code, out, _ = await decide("show", "p1", *where.store_args)
    assert f"waiting for approval: delete_file {{\"path\":\"access.log\"}} (call call_1_0); {how_far}" in out, out

    code, out, err = await decide("approve", "p1", "--as", "ANA", *where.store_args)
    assert code == 2 and f"ana as {me} has approved delete_file (call_1_0) already: it needs 2 different people " \
                          "(1 of 2 so far)" in err, (out, err)
    code, out, err = await decide("approve", "p1", "--as", "bob", *where.store_args)
    assert code == 2 and f"the account {me} has approved delete_file (call_1_0) already, as ana: one account is one " \
                          "person, whatever name it gives" in err, (out, err)
    assert "the next approval must come from another account" in err
    state = where.store().load("p1")
    assert state.status is Status.INTERRUPTED and isinstance(state.interruption, NeedsApproval)
    assert (state.interruption.approvers, state.interruption.accounts) == (("ana",), (me,))
    assert (where.ws / "access.log").exists()

    code, out, err = await decide("decisions", *where.store_args)
    (line,) = out.splitlines()[1:]
    assert " 1 of 2 " in line and f"ana as {me}" in line and "pending" not in line, out
    code, out, err = await decide("decisions", "--json", "--by", "ANA", *where.store_args)
    (record,) = json.loads(out)
    assert (record["verdict"], record["needed"], record["approvers"], record["accounts"]) == \
        ("pending", 2, ["ana"], [me])
    code, out, err = await decide("decisions", "--json", "--by", me.upper(), *where.store_args)
    assert [r["call_id"] for r in json.loads(out)] == ["call_1_0"]  # by the account, whatever its case
    code, out, err = await decide("rules", "explain", "p1", "call_1_0", *where.store_args)
    assert f"recorded: {how_far}, " in out, out


async def second(where: Where, tmp_path: Path, *args: str) -> tuple[int, str, str]:
    """``tether ARGS`` as the second person: another operating-system account on the file
    store, another database role on PostgreSQL."""
    if where.store_args[1].startswith("postgresql://"):
        return await decide(*args, "--store", where.second_url)  # type: ignore[attr-defined]
    return await accounts.tether_as_other(*args, *where.store_args, home=tmp_path / "shared" / "home-2",
                                          env={"USER": "root", "LOGNAME": "root"})  # names the OS does not go by


@pytest.fixture(params=["files", "postgres"])
def two(request, tmp_path: Path) -> Iterator[Where]:
    """A store two accounts decide on: a file store shared with the second account's group,
    or the session's PostgreSQL with a second role."""
    if request.param == "files":
        accounts.can_switch()
        root = accounts.shared(tmp_path / "shared")
        place = Where(["--store", str(accounts.shared(root / "runs"))], root / "ws")
        place.second = accounts.other().pw_name  # type: ignore[attr-defined]
    else:
        request.getfixturevalue("pg")
        place = Where(["--store", request.getfixturevalue("pg_url")], tmp_path / "ws")
        server = request.getfixturevalue("pg_server")
        place.second_url = accounts.second_role(server, "tether_bob")  # type: ignore[attr-defined]
        place.second = "tether_bob"  # type: ignore[attr-defined]
    yield place
    place.close()


async def test_a_second_account_completes_a_two_person_call(two: Where, tmp_path: Path):
    """The run's process waits; the first approval is this account's; the second account
    giving the first one's name is refused (a name is one person too); the second account as
    bob completes it, and the record names both accounts."""
    me, other = accounts.me(two.store_args[1]), two.second  # type: ignore[attr-defined]
    code, _, err = await decide("rules", "add", "--ask", "delete_file", "--approvals", "2", "--reason", "two people",
                                *two.store_args)
    assert code == 0, err
    run = await spawn("run", "destructive", "--run-id", "p2", "--wait-for-decision", "--json", *two.args)
    try:
        await two.waiting("p2")
        code, out, err = await decide("approve", "p2", "--as", "ana", *two.store_args)
        assert code == 0 and f"approved delete_file (call_1_0): 1 of 2 approved (ana as {me}): one more person must " \
                              "approve, from another account" in out, (out, err)
        for _ in range(400):  # the run asks again, with ana's approval on it
            waiting = two.store().load("p2").interruption
            if getattr(waiting, "approvers", ()) == ("ana",):
                break
            await asyncio.sleep(0.05)
        code, out, err = await second(two, tmp_path, "approve", "p2", "--as", "Ana")
        assert code != 0 and f"ana as {me} has approved delete_file (call_1_0) already" in out + err, (out, err)
        assert (two.ws / "access.log").exists()
        code, out, err = await second(two, tmp_path, "approve", "p2", "--as", "bob")
        assert code == 0, (out, err)
    finally:
        code, out, err = await exited(run, CAP_S)
    assert code == 0, err
    assert not (two.ws / "access.log").exists()
    (decision,) = two.store().load("p2").approvals.values()
    assert (decision.approvers, decision.accounts) == (["ana", "bob"], [me, other])
    code, out, err = await decide("decisions", *two.store_args)
    assert f"approved  ana as {me}, bob as {other}" in out, out
    code, out, err = await decide("decisions", "--json", "--by", other, *two.store_args)
    assert [r["verdict"] for r in json.loads(out)] == ["approved"]
