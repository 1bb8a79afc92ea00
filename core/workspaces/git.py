"""The git command line, as the workspaces run it: off the event loop, in a clean environment,
never on the user's index.

Every call is an asyncio subprocess (the loop goes on while git works) with an environment
stripped of the variables that would point git elsewhere (``GIT_DIR``, ``GIT_INDEX_FILE``,
``GIT_WORK_TREE``... set by a hook or a shell Tether was started from:
:data:`REPOSITORY_VARIABLES`), so a command acts on the folder it names and nothing else. Reading a workspace's changes stages files, and that is
done in an index of Tether's own (``GIT_INDEX_FILE``): the user's index, HEAD and branch, and
the worktree's own index that the agent may use, are never written.

Why the CLI and not libgit2 (pygit2) or dulwich: ``git worktree`` and ``git merge-tree
--write-tree`` are the git CLI's, the CLI honours every setting the user's repository has
(hooks, filters, LFS, ``safe.directory``), and its process starts cost milliseconds against
the second a 10,000-file checkout takes (docs/performance.md).
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Mapping
from pathlib import Path

BRANCH_PREFIX = "tether/"
"""Every run's branch is ``tether/RUN_ID``: what the workspaces listing looks for in git."""
_IDENTITY = {"GIT_AUTHOR_NAME": "Tether", "GIT_AUTHOR_EMAIL": "tether@localhost",
             "GIT_COMMITTER_NAME": "Tether", "GIT_COMMITTER_EMAIL": "tether@localhost"}
"""Who Tether's own commits are by (a copy's base): none is ever made in a user's branch."""
_OUTPUT_SHOWN = 600


class GitError(Exception):
    """A git command failed, or git is not installed; the message says which and why."""


def git_binary() -> str:
    found = shutil.which("git")
    if found is None:
        raise GitError("git is not installed (or not on PATH): a run's own workspace needs it")
    return found


REPOSITORY_VARIABLES = frozenset({
    "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_CONFIG", "GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT",
    "GIT_OBJECT_DIRECTORY", "GIT_DIR", "GIT_WORK_TREE", "GIT_IMPLICIT_WORK_TREE", "GIT_GRAFT_FILE", "GIT_INDEX_FILE",
    "GIT_NO_REPLACE_OBJECTS", "GIT_REPLACE_REF_BASE", "GIT_PREFIX", "GIT_INTERNAL_SUPER_PREFIX", "GIT_SHALLOW_FILE",
    "GIT_COMMON_DIR",
})
"""What ``git rev-parse --local-env-vars`` lists: the variables that tie git to one repository
(a hook's, a shell's inside one). Others (``GIT_SSH_COMMAND``, an author's name) are the user's
settings and stay."""


def clean_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment without the variables that point git at another repository,
    index or work tree, with no prompt for credentials, and ``extra`` added."""
    env = {k: v for k, v in os.environ.items() if k not in REPOSITORY_VARIABLES}
    env["GIT_TERMINAL_PROMPT"] = "0"
    env.update(extra or {})
    return env


async def git(*args: str, cwd: Path | str, git_dir: str | None = None, work_tree: str | None = None,
              index: str | None = None, identity: bool = False, ok: tuple[int, ...] = (0,)) -> str:
    """``git ARGS`` in ``cwd``; its output (stdout), or :class:`GitError` with git's own words.

    ``git_dir``/``work_tree``: a repository kept apart from its files (a copy's base).
    ``index``: the index file to use instead of the repository's (``GIT_INDEX_FILE``).
    ``identity``: commit as Tether. ``ok``: the exit codes that are not a failure."""
    extra: dict[str, str] = dict(_IDENTITY) if identity else {}
    if index is not None:
        extra["GIT_INDEX_FILE"] = index
    command = [git_binary()]
    if git_dir is not None:
        command.append(f"--git-dir={git_dir}")
    if work_tree is not None:
        command.append(f"--work-tree={work_tree}")
    command += ["-c", "core.quotepath=off", *args]
    try:
        proc = await asyncio.create_subprocess_exec(
            *command, cwd=str(cwd), env=clean_env(extra), stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    except OSError as exc:
        raise GitError(f"git could not start in {cwd}: {exc.strerror or exc}") from None
    try:
        out, err = await proc.communicate()
    except asyncio.CancelledError:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        raise
    if proc.returncode not in ok:
        said = err.decode("utf-8", "replace").strip() or out.decode("utf-8", "replace").strip()
        if len(said) > _OUTPUT_SHOWN:
            said = said[:_OUTPUT_SHOWN] + "…"
        name = next((a for a in args if not a.startswith("-")), args[0])  # the command, not an option before it
        raise GitError(f"git {name} failed in {cwd}: {said or f'exit {proc.returncode}'}")
    return out.decode("utf-8", "surrogateescape")


async def repo_and_commit(folder: Path | str, ref: str) -> tuple[Path, str]:
    """The top folder of the repository ``folder`` is in, and the commit ``ref`` names there (in
    full), with one git process; :class:`GitError` in words when there is no repository or no
    such commit."""
    if ref.startswith("-"):
        raise GitError(f"{ref!r} is not a ref")
    try:
        out = await git("rev-parse", "--show-toplevel", "--verify", "--quiet", "--end-of-options",
                        f"{ref}^{{commit}}", cwd=folder, ok=(0, 1))
    except GitError:
        raise GitError(f"{folder} is not in a git repository") from None
    lines = out.splitlines()
    if len(lines) < 2:
        raise GitError(f"no commit named {ref!r} in {lines[0] if lines else folder}")
    return Path(lines[0]), lines[1]


async def branch_exists(repo: Path | str, branch: str) -> str | None:
    """The commit ``branch`` points at in ``repo``, or None when there is no such branch."""
    out = await git("rev-parse", "--verify", "--quiet", f"refs/heads/{branch}", cwd=repo, ok=(0, 1))
    return out.strip() or None


async def worktrees(repo: Path | str) -> list[dict[str, str]]:
    """The worktrees git knows of in ``repo`` (``git worktree list --porcelain``): each one's
    ``worktree`` (its path), ``HEAD``, ``branch`` (``refs/heads/...``, absent when detached),
    and ``prunable`` when its folder is gone."""
    out = await git("worktree", "list", "--porcelain", "-z", cwd=repo)
    found: list[dict[str, str]] = []
    entry: dict[str, str] = {}
    for field in out.split("\0"):
        if not field:
            if entry:
                found.append(entry)
            entry = {}
            continue
        key, _, value = field.partition(" ")
        entry[key] = value
    if entry:
        found.append(entry)
    return found


def worktree_gitdir(path: Path | str) -> Path | None:
    """A worktree's own folder in its repository's ``.git`` (what its ``.git`` file points at),
    or None when ``path`` is not a linked worktree. Read from the file, without starting git."""
    try:
        text = (Path(path) / ".git").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    if not text.startswith("gitdir:"):
        return None
    gitdir = Path(text[len("gitdir:"):].strip())
    return gitdir if gitdir.is_absolute() else (Path(path) / gitdir).resolve()
