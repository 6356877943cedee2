"""moto's EC2 on loopback, and ``provisioner-ec2`` run against it as the daemon runs it.

One moto server serves the whole session (starting it and making a VPC costs
seconds); each test gets a cluster name of its own, so the instances of one
test are never ours in another, and a fault proxy of its own in front of moto.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
import yaml

from tests.support.ec2.faults import FaultProxy

REGION = "us-east-1"
#: The executable the package installs, beside the interpreter running the tests.
SCRIPT = Path(sys.executable).parent / "provisioner-ec2"
#: Dummy credentials; the secret is long enough to be found if it ever leaked into a message.
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "AKIAIOSFODNN7EXAMPLE", "AWS_SECRET_ACCESS_KEY": "moto-secret-never-printed-1234"}
IMAGE = "ami-0123456789abcdef0"


@dataclass
class Moto:
    """The moto server, and the subnets every test launches into: one per zone, as in production."""

    url: str
    subnets: list[str]
    zones: list[str]
    server: Any = None

    def ec2(self, url: str | None = None) -> Any:
        """A client straight to moto (or to ``url``): the AWS console of the tests."""
        return boto3.client("ec2", region_name=REGION, endpoint_url=url or self.url,
                            aws_access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
                            aws_secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"])


def start_moto() -> Moto:
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    moto = Moto(url=f"http://{host}:{port}", subnets=[], zones=[f"{REGION}a", f"{REGION}b"], server=server)
    ec2 = moto.ec2()
    vpc = ec2.create_vpc(CidrBlock="10.42.0.0/16")["Vpc"]["VpcId"]
    for n, zone in enumerate(moto.zones):
        moto.subnets.append(ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.42.{n}.0/24",
                                              AvailabilityZone=zone)["Subnet"]["SubnetId"])
    return moto


@dataclass
class Run:
    """One run of the script: what the daemon would see."""

    code: int
    out: dict[str, Any] | None
    stdout: str
    stderr: str


@dataclass
class World:
    """One test's view: its cluster, settings file, proxy, and the script run against them."""

    moto: Moto
    folder: Path
    proxy: FaultProxy
    cluster: str = field(default_factory=lambda: f"test-{uuid.uuid4().hex[:10]}")
    provider: str = "aws"

    def __post_init__(self) -> None:
        self.settings_path = self.folder / "ec2.yaml"
        self.write_settings()

    def settings(self, **over: Any) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "region": REGION,
            "cluster": self.cluster,
            "lead_time_s": 60,
            "templates": [{
                "id": "c6i-4x", "instance_type": "c6i.4xlarge", "image_id": IMAGE,
                "subnets": list(self.moto.subnets), "market": "on-demand", "price_per_hour": 0.68,
                "max_number": 50, "attributes": {"ncpus": 16, "mem": 32768, "type": "X86_64"},
            }],
        }
        doc.update(over)
        return doc

    def write_settings(self, doc: dict[str, Any] | None = None, text: str | None = None) -> None:
        self.settings_path.write_text(text if text is not None else yaml.safe_dump(doc or self.settings()))

    def env(self) -> dict[str, str]:
        """What the provider's env_file holds: settings, endpoint, credentials."""
        return {"EC2_PROVIDER_CONFIG": str(self.settings_path), "AWS_ENDPOINT_URL": self.proxy.url,
                "AWS_EC2_METADATA_DISABLED": "true", "AWS_CONFIG_FILE": str(self.folder / "no-aws-config"),
                "AWS_SHARED_CREDENTIALS_FILE": str(self.folder / "no-aws-credentials"), **CREDENTIALS}

    def run(self, action: str, doc: dict[str, Any], token: str | None = None, timeout: float = 30) -> Run:
        """``provisioner-ec2 ACTION -f INPUT`` with the environment the daemon gives a script, no more."""
        path = self.folder / f"{action}-{uuid.uuid4().hex[:6]}.json"
        path.write_text(json.dumps(doc))
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(self.folder), **self.env(),
               "PROVIDER_NAME": self.provider, "PROVIDER_KIND": "hosts", "PROVISIONER_ACTION": action,
               "PROVISIONER_DEADLINE": str(int(time.time() + timeout))}
        if token:
            env["PROVISIONER_TOKEN"] = token
        proc = subprocess.run([str(SCRIPT), action, "-f", str(path)], env=env, capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)
        path.unlink()
        out = json.loads(proc.stdout) if proc.returncode == 0 else None
        return Run(proc.returncode, out, proc.stdout, proc.stderr)

    # --- the AWS console ------------------------------------------------------------

    def instances(self, **tags: str) -> list[dict[str, Any]]:
        """Every instance of this test's cluster in moto (straight, not through the proxy)."""
        filters = [{"Name": "tag:provisioner:cluster", "Values": [self.cluster]}]
        filters += [{"Name": f"tag:{k}", "Values": [v]} for k, v in tags.items()]
        answer = self.moto.ec2().describe_instances(Filters=filters)
        return [i for r in answer["Reservations"] for i in r["Instances"]]

    def live(self) -> list[dict[str, Any]]:
        return [i for i in self.instances() if i["State"]["Name"] not in ("shutting-down", "terminated")]


def wait_for(predicate: Any, timeout: float, what: str, every: float = 0.2, tell: Any = None) -> Any:
    """Poll until ``predicate()`` is truthy; fail naming ``what`` after ``timeout`` seconds.

    ``tell()``, when given, is added to the failure: what a daemon logged by then.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}" + (f"\n{tell()}" if tell else ""))
        time.sleep(every)


def env_lines(env: dict[str, str]) -> str:
    return "".join(f"{k}={v}\n" for k, v in env.items())

