"""NIXL's Python API as installed by scripts/build-testdeps.sh: the meta
package `nixl` when present, else the wheel directory meson installs
(nixl_cu12 in a host-only build)."""

try:
    from nixl import _bindings  # noqa: F401
    from nixl._api import nixl_agent, nixl_agent_config  # noqa: F401
except ImportError:
    try:
        from nixl_cu12 import _bindings  # noqa: F401
        from nixl_cu12._api import nixl_agent, nixl_agent_config  # noqa: F401
    except ImportError:
        from nixl_cu13 import _bindings  # noqa: F401
        from nixl_cu13._api import nixl_agent, nixl_agent_config  # noqa: F401
