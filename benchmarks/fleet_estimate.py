"""The estimate for 100 hours of audio spread over 1, 2, 4, 8 and 16 rented GPUs (docs/offload.md). Prints tables,
asserts nothing; uses the price table and throughput figures in resources/, no network.

    .venv/bin/python benchmarks/fleet_estimate.py [--hours 100] [--model large-v3] [--upload-mbps 20,100]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.cloud.pricing.estimate import Assumptions, Job, estimate
from app.cloud.pricing.report import format_spread


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hours", type=float, default=100.0)
    parser.add_argument("--model", default="large-v3")
    parser.add_argument("--upload-mbps", default="20,100")
    parser.add_argument("--files", type=int, default=100)
    args = parser.parse_args()
    for mbps in (float(part) for part in args.upload_mbps.split(",")):
        job = Job(audio_seconds=args.hours * 3600, model=args.model, diarize=True, files=args.files)
        result = estimate(job, assumptions=Assumptions(upload_mbps=mbps, include_local=False))
        print(
            f"## {args.hours:g} h of audio in {args.files} files (128 kbit/s), {args.model}, diarized, "
            f"uplink {mbps:g} Mbit/s"
        )
        print(format_spread(result, (1, 2, 4, 8, 16), rows=3))
        print()


if __name__ == "__main__":
    main()
