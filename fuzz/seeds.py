#!/usr/bin/env python3
"""Build each fuzz target's seed corpus from the repository's own fixtures
(tests/fixtures/problems, src/judge/languages.yaml) into fuzz/corpus/<target>/.
Reads nothing outside the repository. Idempotent: seeds are named by content."""
import hashlib
import io
import pathlib
import tarfile

FUZZ = pathlib.Path(__file__).resolve().parent
REPO = FUZZ.parent
PROBLEMS = REPO / "tests" / "fixtures" / "problems"
SEP = b"\xff"


def seed(target, data):
    d = FUZZ / "corpus" / target
    d.mkdir(parents=True, exist_ok=True)
    (d / ("seed-" + hashlib.sha1(data).hexdigest()[:16])).write_bytes(data)


def read(p):
    return p.read_bytes() if p.is_file() else b""


problems = sorted(p for p in PROBLEMS.iterdir() if (p / "problem.yaml").is_file())
for p in problems:
    # unpack: the limits bytes (64 entries, 65,280 bytes), then a plain tar.
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for f in sorted(p.rglob("*")):
            if f.is_file() and f.stat().st_size < 4096:
                tar.add(f, arcname=str(f.relative_to(p)), recursive=False)
    seed("unpack", b"\x3f\xff" + buf.getvalue())
    # problem: problem.yaml, data/testdata.yaml, data/secret/testdata.yaml, .timelimit
    seed("problem", SEP.join(read(p / n) for n in [
        "problem.yaml", "data/testdata.yaml", "data/secret/testdata.yaml", ".timelimit"]))
    # default_validator: each answer against itself and against the next one,
    # under plain, case/space-sensitive and tolerance flags.
    answers = sorted(p.rglob("*.ans"))[:6]
    for a, b in zip(answers, answers[1:] + answers[:1]):
        for mode in (0, 3, 8 | 0x20, 12 | 0x40):
            seed("default_validator", bytes([mode]) + read(a) + SEP + read(b))
seed("default_validator", b"\x08" + b"1.0 2.5e3 0x1p-3\n" + SEP + b"1.0000001 2500 0.125\n")
languages = read(REPO / "src" / "judge" / "languages.yaml")
for name in [b"a.c", b"main.cpp", b"x.py", b"Main.java", b"lib.rs", b"README"]:
    seed("languages", languages + SEP + name)
# server_body: the route byte (fuzz_targets/server_body.rs's ROUTES), then a body.
for route, body in [
    (0, b'{"name":"r2"}'),
    (1, b'{"scopes":["manager"]}'),
    (2, b'{"problem_id":1,"language":"c","files":[{"name":"a.c","content":"int main(){}"}]}'),
    (2, b'{"problem_id":1,"language":"python3","files":[{"name":"a.py","content_base64":"cHJpbnQoMSk="}]}'),
    (3, b'{"expected_attempt":1}'),
    (3, b''),
    (4, b'{"languages":["c","cpp"],"wait_seconds":0}'),
    (5, b'{"lease_token":"x","attempt":1,"seconds":30}'),
    (6, b'{"lease_token":"x","attempt":1,"done":1,"total":2}'),
    (7, b'{"lease_token":"x","attempt":1}'),
    (8, b'{"lease_token":"x","attempt":1,"reason":"r","message":"m"}'),
    (9, b'{"lease_token":"x","attempt":1,"verdict":"AC","score":1,"details":[],"extra":{}}'),
    (14, b'{"lease_token":"x","attempt":1,"timings":[]}'),
]:
    seed("server_body", bytes([route]) + body)
