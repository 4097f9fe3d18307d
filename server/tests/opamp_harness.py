"""Runs the real OpAMP client (PyPI: opentelemetry-opamp-client) against VectorFlow for the
integration test in server/tests/api/opamp.rs.

It connects with an agent description, applies every remote config it receives (records
it and reports APPLIED, as a collector's supervisor would), and keeps what happened in a
JSON file that it rewrites atomically after each change:

    {"instanceUid": hex, "connected": bool, "messages": n,
     "received": [{"hash": hex, "config": {name: body}, "contentTypes": {name: type}}],
     "applied": [hex, ...], "errors": [text, ...], "stopped": bool}

It stops, sending AgentDisconnect first, when its standard input closes (the test drops
it) or after --max-seconds, whichever comes first.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading

import requests
from opentelemetry._opamp.agent import OpAMPAgent
from opentelemetry._opamp.callbacks import OpAMPCallbacks
from opentelemetry._opamp.client import OpAMPClient
from opentelemetry._opamp.proto import opamp_pb2
from opentelemetry._opamp.transport.requests import RequestsTransport


class Recorder:
    def __init__(self, path: str):
        self.path = path
        self.lock = threading.Lock()
        self.state = {
            "instanceUid": "",
            "connected": False,
            "messages": 0,
            "received": [],
            "applied": [],
            "errors": [],
            "stopped": False,
        }

    def update(self, change) -> None:
        with self.lock:
            change(self.state)
            tmp = self.path + ".tmp"
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump(self.state, f)
            os.replace(tmp, self.path)


class ApplyEverything(OpAMPCallbacks):
    def __init__(self, recorder: Recorder):
        self.recorder = recorder

    def on_connect(self, agent, client) -> None:
        self.recorder.update(lambda s: s.update(connected=True))

    def on_error(self, agent, client, error_response) -> None:
        text = f"{error_response.type}: {error_response.error_message}"
        self.recorder.update(lambda s: s["errors"].append(text))

    def on_message(self, agent, client, message) -> None:
        self.recorder.update(lambda s: s.update(messages=s["messages"] + 1))
        remote = message.remote_config
        if remote is None:
            return
        config_map = remote.config.config_map
        entry = {
            "hash": remote.config_hash.hex(),
            "config": {name: f.body.decode("utf-8") for name, f in config_map.items()},
            "contentTypes": {name: f.content_type for name, f in config_map.items()},
        }
        self.recorder.update(lambda s: s["received"].append(entry))
        status = client.update_remote_config_status(
            remote_config_hash=remote.config_hash,
            status=opamp_pb2.RemoteConfigStatuses_APPLIED,
        )
        if status is not None:
            agent.send(client.build_remote_config_status_response_message(status))
        self.recorder.update(lambda s: s["applied"].append(entry["hash"]))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--service-name", required=True)
    parser.add_argument("--host-name", required=True)
    parser.add_argument("--label", action="append", default=[], help="k=v, repeatable")
    parser.add_argument("--interval", type=float, default=0.2)
    parser.add_argument("--max-seconds", type=float, default=120.0)
    args = parser.parse_args()

    labels = dict(item.split("=", 1) for item in args.label)
    recorder = Recorder(args.out)
    session = requests.Session()
    session.trust_env = False  # never through a proxy: the server is on loopback
    client = OpAMPClient(
        endpoint=args.endpoint,
        headers={"Authorization": f"Bearer {args.token}"},
        timeout_millis=5_000,
        agent_identifying_attributes={"service.name": args.service_name},
        agent_non_identifying_attributes={"host.name": args.host_name, **labels},
        transport=RequestsTransport(session),
    )
    recorder.update(lambda s: s.update(instanceUid=client._instance_uid.hex()))
    agent = OpAMPAgent(
        interval=args.interval,
        callbacks=ApplyEverything(recorder),
        client=client,
        initial_backoff=0.2,
    )
    agent.start()

    done = threading.Event()

    def wait_for_stdin_to_close() -> None:
        for _ in sys.stdin:
            pass
        done.set()

    threading.Thread(target=wait_for_stdin_to_close, daemon=True).start()
    done.wait(args.max_seconds)
    agent.stop(timeout=5)
    recorder.update(lambda s: s.update(stopped=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
