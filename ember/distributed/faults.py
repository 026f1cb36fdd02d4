"""A rank that fails must not leave the others waiting.

Three mechanisms, all installed by ``init_process_group`` on a world of more than one:

- an unhandled exception on any rank prints that rank's traceback and aborts the
  whole job (``MPI_Abort``; mpiexec then ends every rank and exits non-zero);
- every wait has a deadline; when it passes, the waiting rank asks the other ranks of
  the group, on a side channel (:class:`StatusChannel`, its own communicator), which
  collective each has reached and what it is waiting in. Every rank answers while it
  waits in any ember collective; a rank that is dead, or stuck in its own code, does
  not answer within a second or two, and is named as such. The resulting
  :class:`~ember.distributed.DistributedError` then aborts the job like any other;
- a rank that the launcher terminates (because another rank was killed, or aborted)
  first prints the collective it was waiting in, beside mpiexec's own line naming the
  rank that died.
"""
from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
import traceback

import numpy as np

__all__ = ["install", "StatusChannel"]

_installed = [False]
_QUERY_TAG, _REPLY_TAG = 31001, 31002
_REPLY_BYTES = 2048


def _ranks(ranks) -> str:
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(str(r) for r in ranks)


class StatusChannel:
    """This process's answer to "which collective are you in?" and the question itself,
    over ``comm`` (a duplicate of the world communicator, used for nothing else).

    A query is two int64s (group id, the asker's collective number); the answer is a
    small JSON object: this rank's number of collectives started on that group, the
    last one's name, and what it is waiting in now, if anything.
    """

    def __init__(self, comm, global_rank: int):
        from mpi4py import MPI
        self.MPI = MPI
        self.comm = comm
        self.rank = global_rank
        self.groups = {}        # group id -> this rank's group object
        self.waiting = None     # the Work this rank is blocked in
        self.since = 0.0
        self._sends = []        # (request, buffer) of replies in flight

    def register(self, group) -> None:
        self.groups[group.group_id] = group

    def enter(self, work, now: float):
        """Mark ``work`` as what this rank waits in; returns the previous mark."""
        previous = (self.waiting, self.since)
        self.waiting, self.since = work, now
        return previous

    def leave(self, previous) -> None:
        self.waiting, self.since = previous

    def status(self, group_id: int) -> dict:
        group = self.groups.get(group_id)
        answer = {"rank": self.rank}
        if group is not None:
            answer["seq"], answer["last"] = group.seq, group.last_name
        if self.waiting is not None:
            answer["waiting"] = self.waiting.describe()
            answer["for"] = round(time.monotonic() - self.since, 1)
        return answer

    def serve(self) -> None:
        """Answer every query that has arrived (called while this rank waits)."""
        MPI = self.MPI
        probe = MPI.Status()
        try:
            while self.comm.Iprobe(MPI.ANY_SOURCE, _QUERY_TAG, probe):
                source = probe.Get_source()
                query = np.empty(2, np.int64)
                self.comm.Recv(query, source, _QUERY_TAG)
                answer = dict(self.status(int(query[0])), asked=int(query[1]))
                text = json.dumps(answer).encode()[:_REPLY_BYTES]
                reply = np.zeros(_REPLY_BYTES, np.uint8)
                reply[:len(text)] = np.frombuffer(text, np.uint8)
                self._sends.append((self.comm.Isend(reply, source, _REPLY_TAG), reply))
            self._sends = [s for s in self._sends if not s[0].Test()]
        except MPI.Exception:
            # Answering is a courtesy to the asker; a peer that vanished mid-answer must
            # not turn this rank's own (healthy) wait into an error.
            pass

    def ask(self, work, window: float) -> dict:
        """The answers of the group's other ranks that came within ``window`` seconds."""
        group = work.group
        others = [r for r in group.ranks if r != self.rank]
        query = np.array([group.group_id, work.seq or 0], np.int64)
        pending, buffers, answers = {}, {}, {}
        for r in others:
            try:
                self._sends.append((self.comm.Isend(query, r, _QUERY_TAG), query))
                buffers[r] = np.zeros(_REPLY_BYTES, np.uint8)
                pending[r] = self.comm.Irecv(buffers[r], r, _REPLY_TAG)
            except self.MPI.Exception:
                pending.pop(r, None)
        deadline = time.monotonic() + window
        while pending and time.monotonic() < deadline:
            self.serve()
            for r, request in list(pending.items()):
                try:
                    done = request.Test()
                except self.MPI.Exception:
                    del pending[r]
                    continue
                if done:
                    del pending[r]
                    answers[r] = json.loads(buffers[r].tobytes().rstrip(b"\0"))
            time.sleep(0.001)
        for request in pending.values():
            try:
                request.Cancel()
            except self.MPI.Exception:
                pass
        return answers

    def diagnose(self, work, limit: float) -> str:
        """Which ranks did not join ``work`` and what each is doing instead."""
        answers = self.ask(work, window=min(2.0, max(0.5, limit / 10)))
        others = [r for r in work.group.ranks if r != self.rank]
        silent = [r for r in others if r not in answers]
        same, parts = [], []
        if silent:
            parts.append(f"{_ranks(silent)} did not answer a status probe (dead, or stuck "
                         "outside ember's collectives: in its own code or a blocking call)")
        for r in others:
            if r in silent:
                continue
            answer = answers[r]
            seq = answer.get("seq", 0)
            doing = (f"waiting in {answer['waiting']} for {answer['for']} s"
                     if "waiting" in answer else "running its own code")
            if work.seq is None:
                parts.append(f"rank {r} is {doing}")
            elif answer.get("waiting") == work.describe():
                same.append(r)
            elif seq < work.seq:
                last = (f"its last collective on this group was #{seq} ({answer['last']})"
                        if seq else "it has started no collective on this group")
                parts.append(f"rank {r} has not joined it: {last}, and it is {doing}")
            elif seq == work.seq and answer.get("last") != work.name:
                parts.append(f"rank {r} called {answer['last']} as collective #{seq} "
                             f"instead, and is {doing}")
            else:
                parts.append(f"rank {r} has started it (its last collective on this group "
                             f"is #{seq}, {answer['last']}) and is {doing}")
        if same:
            parts.append(f"{_ranks(same)} {'is' if len(same) == 1 else 'are'} waiting in it "
                         "too")
        if not silent and len(same) == len(others):
            parts.append("every rank is in it, yet it did not complete (a transport failure)")
        return "; ".join(parts)


def install(group) -> None:
    """Abort the job when this rank dies of an unhandled exception, and say which
    collective this rank was in when the launcher ends the job (world size > 1)."""
    if group.size <= 1 or _installed[0]:
        return
    previous = sys.excepthook

    def excepthook(kind, value, tb):
        text = "".join(traceback.format_exception(kind, value, tb))
        sys.stderr.write(f"[ember.distributed] rank {group.global_rank} failed; aborting the "
                         f"job:\n{text}")
        sys.stderr.flush()
        try:
            group.abort(1)
        finally:
            previous(kind, value, tb)

    sys.excepthook = excepthook
    status = group._status
    if (status is not None and threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL):
        signal.signal(signal.SIGTERM, _terminated(status))
    _installed[0] = True


def _terminated(status):
    def on_sigterm(signum, frame):
        work = status.waiting
        if work is not None:
            sys.stderr.write(
                f"[ember.distributed] rank {status.rank}: the launcher ended the job (another "
                f"rank died or aborted) while this rank waited "
                f"{time.monotonic() - status.since:.1f} s in {work.describe()}\n")
            sys.stderr.flush()
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
    return on_sigterm
