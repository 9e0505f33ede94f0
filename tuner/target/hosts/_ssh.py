"""A remote host over SSH (paramiko): verified host keys, key auth, timeouts, careful reconnects.

Retry policy, in one place because it is the part that can do harm:

- Connecting (TCP, handshake, host key, authentication) and opening the session channel are retried with
  exponential backoff, ``retries`` times: nothing has run on the host yet, so a retry cannot repeat anything.
- Once the command has been sent, a dropped connection is *not* retried: the command may have done part of
  its work (``systemctl restart``, a ``kill``), and running it twice is not the same as running it once.
  :meth:`SSHHost.run` raises :class:`~tuner.errors.HostError` saying so; the caller decides.
- File reads and atomic writes over SFTP are idempotent (the same bytes land under the same name), so they
  are retried after reconnecting.
"""

from __future__ import annotations

import base64
import contextlib
import errno
import getpass
import hashlib
import os
import posixpath
import secrets
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

import paramiko

from tuner.config import SSHSection
from tuner.errors import HostError
from tuner.target.hosts._base import BaseHost, CommandResult, quote_command

__all__ = ["HostKeyRejected", "SSHAuthFailed", "SSHHost", "fingerprint"]

T = TypeVar("T")

# What a transient network problem looks like from paramiko: worth a reconnect before the command starts.
_TRANSIENT = (OSError, EOFError, paramiko.SSHException)


_DEADLINE = "tune: command deadline"


def _drain(chan: paramiko.Channel, *, deadline: float) -> tuple[list[bytes], list[bytes]]:
    """Read a command's stdout and stderr until it exits; ``TimeoutError(_DEADLINE)`` past the deadline.

    Both streams are read as they come (a command filling the stderr window would otherwise block forever).
    """
    out: list[bytes] = []
    err: list[bytes] = []
    chan.settimeout(0.05)
    stdout_open = True
    while True:
        while chan.recv_stderr_ready():
            err.append(chan.recv_stderr(65536))
        if stdout_open:
            data = _recv_some(chan)
            if data == b"":
                stdout_open = False
            elif data:
                out.append(data)
        if not stdout_open and chan.exit_status_ready():
            while chan.recv_stderr_ready():
                err.append(chan.recv_stderr(65536))
            return out, err
        transport = chan.get_transport()
        if transport is None or not transport.is_active():
            raise OSError("connection closed")
        if time.monotonic() >= deadline:
            raise TimeoutError(_DEADLINE)
        if not stdout_open:
            time.sleep(0.01)


def _recv_some(chan: paramiko.Channel) -> bytes | None:
    """Up to 64 KiB of stdout; None when nothing arrived within the channel's short timeout."""
    try:
        return chan.recv(65536)
    except TimeoutError:
        return None


class _GaveUp(Exception):
    """Every retry failed transiently; ``last`` is the final error."""

    def __init__(self, last: BaseException | None) -> None:
        super().__init__(str(last))
        self.last = last


def _dropped_link(exc: BaseException) -> bool:
    """An SFTP failure that a reconnect can cure, as opposed to an answer from the server (ENOENT, EACCES)."""
    if isinstance(exc, FileNotFoundError | PermissionError | IsADirectoryError):
        return False
    if isinstance(exc, OSError) and not isinstance(exc, TimeoutError):
        return exc.errno is None or exc.errno == errno.EPIPE
    return isinstance(exc, TimeoutError | EOFError | paramiko.SSHException)


class HostKeyRejected(HostError):
    """The server's host key is unknown (and trust-on-first-use is off) or differs from known_hosts."""


class SSHAuthFailed(HostError):
    """The server refused every key offered: retrying cannot help."""


def fingerprint(key: paramiko.PKey) -> str:
    """OpenSSH's format (``SHA256:base64``), so users can compare it with ``ssh-keygen -lf``."""
    digest = hashlib.sha256(key.asbytes()).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


def _known_hosts_name(host: str, port: int) -> str:
    return host if port == 22 else f"[{host}]:{port}"


class _RejectUnknown(paramiko.MissingHostKeyPolicy):
    """Refuse an unknown host key, naming the host and the fingerprint the user has to check."""

    def __init__(self, *, host: str, port: int, known_hosts: str) -> None:
        # paramiko passes "[host]:port" for non-22 ports; we name the host as the user configured it.
        self._host = host
        self._port = port
        self._known_hosts = known_hosts

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
        raise HostKeyRejected(
            f"host key of {self._host}:{self._port} is not in {self._known_hosts} "
            f"({key.get_name()} {fingerprint(key)}). Verify the fingerprint, then add it "
            f"(`ssh-keyscan -p {self._port} {self._host} >> {self._known_hosts}`) or set "
            "target.ssh.accept_new_host_key = true to trust it on first use."
        )


class _AcceptNew(paramiko.MissingHostKeyPolicy):
    """Trust-on-first-use: remember an unknown key by appending one line to known_hosts.

    Appending (rather than paramiko's ``save_host_keys``, which rewrites the file) keeps the user's comments
    and hashed entries. A *changed* key never reaches this policy: paramiko raises BadHostKeyException first.
    """

    def __init__(self, *, host: str, port: int, known_hosts: str) -> None:
        # paramiko passes "[host]:port" for non-22 ports; we name the host as the user configured it.
        self._host = host
        self._port = port
        self._known_hosts = known_hosts

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
        name = _known_hosts_name(self._host, self._port)
        path = Path(self._known_hosts)
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        with path.open("a") as fh:
            fh.write(f"{name} {key.get_name()} {key.get_base64()}\n")
        client.get_host_keys().add(name, key.get_name(), key)


class SSHHost(BaseHost):
    """A machine reached over SSH. Commands are argv lists, quoted with ``shlex.join`` for its shell."""

    def __init__(
        self,
        *,
        host: str,
        port: int = 22,
        user: str | None = None,
        key_file: str | None = None,
        known_hosts: str | None = None,
        accept_new_host_key: bool = False,
        connect_timeout_s: float = 10.0,
        command_timeout_s: float = 120.0,
        keepalive_s: float = 15.0,
        retries: int = 3,
        retry_backoff_s: float = 1.0,
    ) -> None:
        self._host = host
        self._port = port
        self._user = user or getpass.getuser()
        self._key_file = os.path.expanduser(key_file) if key_file else None
        self._known_hosts = os.path.expanduser(known_hosts or "~/.ssh/known_hosts")
        self._accept_new = accept_new_host_key
        self._connect_timeout = connect_timeout_s
        self._command_timeout = command_timeout_s
        self._keepalive = keepalive_s
        self._retries = retries
        self._backoff = retry_backoff_s
        self._client: paramiko.SSHClient | None = None
        self._sftp: paramiko.SFTPClient | None = None
        # One connection is shared by the study loop and the lock's heartbeat thread: connecting and
        # reconnecting happen under this lock (channels themselves are safe to use concurrently).
        self._mutex = threading.RLock()
        self.host_key_fingerprint: str | None = None
        """The verified server key's fingerprint, once connected (``tune check`` prints it)."""

    @classmethod
    def from_section(cls, section: SSHSection) -> SSHHost:
        return cls(
            host=section.host,
            port=section.port,
            user=section.user,
            key_file=section.key_file,
            known_hosts=section.known_hosts,
            accept_new_host_key=section.accept_new_host_key,
            connect_timeout_s=section.connect_timeout_s,
            command_timeout_s=section.command_timeout_s,
            keepalive_s=section.keepalive_s,
            retries=section.retries,
            retry_backoff_s=section.retry_backoff_s,
        )

    @property
    def name(self) -> str:
        return f"{self._user}@{self._host}:{self._port}"

    # -- connection --------------------------------------------------------------------------------------

    def _connect_once(self) -> paramiko.SSHClient:
        client = paramiko.SSHClient()
        if os.path.exists(self._known_hosts):
            client.load_host_keys(self._known_hosts)
        policy: paramiko.MissingHostKeyPolicy = (
            _AcceptNew(host=self._host, port=self._port, known_hosts=self._known_hosts)
            if self._accept_new
            else _RejectUnknown(host=self._host, port=self._port, known_hosts=self._known_hosts)
        )
        client.set_missing_host_key_policy(policy)
        try:
            client.connect(
                self._host,
                port=self._port,
                username=self._user,
                key_filename=self._key_file,
                # With an explicit key we use exactly that key (plus the agent); otherwise the usual
                # ~/.ssh/id_* files, like `ssh` does.
                look_for_keys=self._key_file is None,
                allow_agent=True,
                timeout=self._connect_timeout,
                banner_timeout=self._connect_timeout,
                auth_timeout=self._connect_timeout,
                channel_timeout=self._connect_timeout,
            )
        except paramiko.BadHostKeyException as exc:
            client.close()
            entry = _known_hosts_name(self._host, self._port)
            raise HostKeyRejected(
                f"HOST KEY CHANGED for {self._host}:{self._port}: the server presented {exc.key.get_name()} "
                f"{fingerprint(exc.key)} but {self._known_hosts} has {fingerprint(exc.expected_key)}. "
                "This can be a man-in-the-middle attack or a reinstalled host; refusing to connect. If the "
                f"change is expected, remove the old entry (`ssh-keygen -R '{entry}' -f "
                f"{self._known_hosts}`) and verify the new fingerprint."
            ) from None
        except HostKeyRejected:
            client.close()
            raise
        except paramiko.AuthenticationException as exc:
            client.close()
            how = f"key {self._key_file}" if self._key_file else "the SSH agent and ~/.ssh/id_* keys"
            raise SSHAuthFailed(f"SSH authentication as {self.name} failed with {how}: {exc}") from None
        except BaseException:
            client.close()
            raise
        transport = client.get_transport()
        assert transport is not None
        if self._keepalive > 0:
            # Keeps NAT/firewall state alive through a 6-minute weight load, and notices a dead peer.
            transport.set_keepalive(int(max(1, self._keepalive)))
        key = transport.get_remote_server_key()
        self.host_key_fingerprint = fingerprint(key)
        return client

    def _ensure(self) -> paramiko.SSHClient:
        """A live connection: the current one, or a new one after retries with exponential backoff."""
        with self._mutex:
            if self._client is not None:
                transport = self._client.get_transport()
                if transport is not None and transport.is_active():
                    return self._client
                self._drop()
            try:
                self._client = self._retrying(self._connect_once, transient=lambda exc: isinstance(exc, _TRANSIENT))
            except _GaveUp as exc:
                raise HostError(
                    f"cannot connect to {self.name} after {self._retries + 1} attempts: "
                    f"{type(exc.last).__name__}: {exc.last}"
                ) from None
            return self._client

    def _retrying(
        self,
        op: Callable[[], T],
        *,
        transient: Callable[[BaseException], bool],
        reset: Callable[[], None] | None = None,
    ) -> T:
        """``op()``, retried ``retries`` times with exponential backoff while it fails transiently.

        Only for operations that cannot have done anything yet, or that are idempotent (see the module docstring).
        """
        last: BaseException | None = None
        for attempt in range(self._retries + 1):
            if attempt:
                time.sleep(self._backoff * 2 ** (attempt - 1))
            try:
                return op()
            except Exception as exc:
                if not transient(exc):
                    raise
                last = exc
                if reset is not None:
                    reset()
        raise _GaveUp(last)

    def _drop(self) -> None:
        with self._mutex:
            if self._sftp is not None:
                with contextlib.suppress(Exception):
                    self._sftp.close()
            if self._client is not None:
                with contextlib.suppress(Exception):
                    self._client.close()
            self._sftp = None
            self._client = None

    def connect(self) -> None:
        """Connect now (verifying the host key) instead of on first use; ``tune check`` starts here."""
        self._ensure()

    def verify(self) -> str:
        self.connect()
        return f"host {self.name} reachable, host key {self.host_key_fingerprint} verified"

    def close(self) -> None:
        self._drop()

    # -- commands ----------------------------------------------------------------------------------------

    def _open_channel(self, command: str) -> paramiko.Channel:
        """A session channel, retrying (with reconnects) only while nothing has been sent yet."""

        def open_session() -> paramiko.Channel:
            transport = self._ensure().get_transport()
            if transport is None:
                raise paramiko.SSHException("no transport")
            return transport.open_session(timeout=self._connect_timeout)

        try:
            return self._retrying(open_session, transient=lambda exc: isinstance(exc, _TRANSIENT), reset=self._drop)
        except _GaveUp as exc:
            raise HostError(f"cannot open a session on {self.name} to run `{command}`: {exc.last}") from None

    def run(
        self, argv: Sequence[str], *, timeout: float | None = None, stdin: bytes | None = None
    ) -> CommandResult:
        command = quote_command(argv)
        limit = self._command_timeout if timeout is None else timeout
        chan = self._open_channel(command)
        try:
            try:
                chan.exec_command(command)
            except _TRANSIENT as exc:
                self._drop()
                raise HostError(
                    f"connection to {self.name} failed while starting `{command}` ({exc}); it may or may not "
                    "have started, so it was not re-run"
                ) from None
            return self._collect(chan, command, limit, stdin)
        finally:
            with contextlib.suppress(Exception):
                chan.close()

    def _collect(
        self, chan: paramiko.Channel, command: str, limit: float, stdin: bytes | None
    ) -> CommandResult:
        try:
            if stdin is not None:
                chan.sendall(stdin)
            chan.shutdown_write()  # EOF on the command's stdin, so `cat`-like commands finish
            out, err = _drain(chan, deadline=time.monotonic() + limit)
            status = chan.recv_exit_status()
        except (TimeoutError, *_TRANSIENT) as exc:
            if isinstance(exc, TimeoutError) and str(exc) == _DEADLINE:
                raise HostError(
                    f"`{command}` timed out after {limit:g} s on {self.name} (channel closed; the remote "
                    "command may still be running)"
                ) from None
            self._drop()
            raise HostError(
                f"connection to {self.name} lost while `{command}` was running "
                f"({type(exc).__name__}: {exc}); not re-run because it may have had effects"
            ) from None
        if status == -1:
            # The server closed the channel without an exit status: the command was killed by a signal
            # or sshd went away mid-command.
            raise HostError(
                f"`{command}` on {self.name} ended without an exit status (killed, or sshd stopped)"
            )
        return CommandResult(
            command=command,
            exit_status=status,
            stdout=b"".join(out).decode(errors="replace"),
            stderr=b"".join(err).decode(errors="replace"),
        )

    # -- files (SFTP) --------------------------------------------------------------------------------------

    def _sftp_client(self) -> paramiko.SFTPClient:
        with self._mutex:
            client = self._ensure()
            if self._sftp is None:
                self._sftp = client.open_sftp()
                channel = self._sftp.get_channel()
                if channel is not None:
                    channel.settimeout(self._command_timeout)
            return self._sftp

    def _idempotent(self, what: str, op: Callable[[paramiko.SFTPClient], T]) -> T:
        """Run an SFTP operation; reconnect and retry on a dropped connection (safe: it is idempotent)."""
        try:
            return self._retrying(lambda: op(self._sftp_client()), transient=_dropped_link, reset=self._drop)
        except _GaveUp as exc:
            raise HostError(f"{what} on {self.name} failed after {self._retries + 1} attempts: {exc.last}") from None

    def read_file(self, path: str, *, offset: int = 0) -> bytes:
        def op(sftp: paramiko.SFTPClient) -> bytes:
            with sftp.open(path, "rb") as fh:
                if offset:
                    fh.seek(offset)
                fh.prefetch()
                return fh.read()

        return self._idempotent(f"reading {path}", op)

    def write_file(self, path: str, data: bytes, *, mode: int = 0o644) -> None:
        directory, base = posixpath.split(path)
        tmp = posixpath.join(directory, f".{base}.{secrets.token_hex(4)}.tmp")

        def op(sftp: paramiko.SFTPClient) -> None:
            try:
                with sftp.open(tmp, "wb") as fh:
                    fh.set_pipelined(True)
                    fh.write(data)
                sftp.chmod(tmp, mode)
                # posix-rename@openssh.com replaces the target atomically; plain SFTP rename refuses to.
                sftp.posix_rename(tmp, path)
            except BaseException:
                with contextlib.suppress(Exception):
                    sftp.remove(tmp)
                raise

        self._idempotent(f"writing {path}", op)
