"""The blackwell.serving lab: a local stand-in for everything a GPU fleet reaches.

It starts a Docker engine, builds a systemd-capable Debian image without a
registry, makes the tool venv, and serves stand-ins (an NVIDIA-shaped apt
repository, an sglang-shaped git repository, a wheel index for GPU-only
wheels). It knows the collection only through inventories and
``ansible-playbook``, like a user. Run ``python3 -m lab --help``.
"""
