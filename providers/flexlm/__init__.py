"""A v2 units provider lending FlexNet (FlexLM) license tokens from a pool shared by several clusters.

Each cluster runs its own daemon with its own controller; what they have in
common is the license server and the pool ledger, where every borrowing is
written before it is reported. The package never imports the daemon's own
packages, so it runs (and is tested) exactly as any other provider script.
"""
