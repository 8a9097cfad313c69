"""The spec's site section: rack classes, hall geometry, device power and address space.

What the building gives the cluster: how much power, space and cooling a rack has, where racks
stand (for cable lengths), the power figures a user measured or contracted for a device, and
the management and BMC ranges every address is drawn from. Ranges no host can be addressed
from are refused here, with the network the user probably meant.
"""

from __future__ import annotations

from ipaddress import IPv4Network
from typing import Annotated, Literal

from pydantic import BeforeValidator, Field, WithJsonSchema, model_validator

from infra.spec.base import GROUP_NAME, ONE_LINE, StrictModel, TextRule

# Ranges no host can be addressed from (RFC 6890 special-purpose registry): "this network",
# loopback, link-local, multicast, and reserved up to the limited broadcast address.
_UNADDRESSABLE = {
    IPv4Network("0.0.0.0/8"): "'this network' (RFC 1122)",
    IPv4Network("127.0.0.0/8"): "loopback",
    IPv4Network("169.254.0.0/16"): "link-local (RFC 3927)",
    IPv4Network("224.0.0.0/4"): "multicast",
    IPv4Network("240.0.0.0/4"): "reserved or broadcast (RFC 1112, RFC 919)",
}


def _parse_cidr(value: object) -> IPv4Network:
    """Accept only ``a.b.c.d/N`` strings of host-addressable ranges.

    YAML ints and booleans are not networks; multicast, broadcast, loopback, link-local and
    reserved ranges cannot address servers or BMCs.
    """
    if not isinstance(value, str) or "/" not in value:
        raise ValueError(f"expected a CIDR such as 10.10.0.0/16, got {value!r}")
    try:
        network = IPv4Network(value)
    except ValueError as exc:
        try:  # the common slip: a host address instead of the network address
            hint = f"; did you mean {IPv4Network(value, strict=False)}?"
        except ValueError:
            hint = ""
        raise ValueError(f"{value!r} is not a valid IPv4 network ({exc}){hint}") from None
    for special, what in _UNADDRESSABLE.items():
        if network.overlaps(special):
            raise ValueError(
                f"{network} overlaps {special}, {what}: no host can be addressed there; "
                "use a private range such as 10.10.0.0/16"
            )
    return network


Cidr = Annotated[
    IPv4Network,
    BeforeValidator(_parse_cidr),
    WithJsonSchema({"type": "string", "format": "ipv4-network", "pattern": r"^[0-9.]+/[0-9]+$"}),
]


# --- site -----------------------------------------------------------------------------------


class Rack(StrictModel):
    """The racks servers are placed in."""

    power_kw: float = Field(44.0, gt=0, le=500, description="Power budget per rack, kW.")
    units: int = Field(48, ge=4, le=60, description="Usable rack units per rack.")
    cooling: Literal["air", "liquid"] = Field("air", description="How racks are cooled.")
    pdus: int | None = Field(
        None, ge=0, le=8, description="PDUs per rack (BMC ports); default from the catalog."
    )
    air_cooling_limit_kw: float | None = Field(
        None,
        gt=0,
        le=200,
        description="Most heat one air-cooled rack can reject, kW; default from the catalog "
        "(site.air_cooling_limit_kw). Raise it if your hall is rated higher (rear-door HX).",
    )


class Layout(StrictModel):
    """Hall geometry for cable-length estimates (rack pitch, row spacing, slack)."""

    rack_width_m: float = Field(
        0.6, gt=0, le=2, description="Centre-to-centre distance of racks in a row, metres."
    )
    row_pitch_m: float = Field(
        2.4,
        gt=0,
        le=20,
        description="Centre-to-centre distance of rows, metres (rack depth plus one aisle).",
    )
    tray_rise_m: float = Field(
        0.5, ge=0, le=5, description="Run from a rack's top to the overhead tray, metres."
    )
    slack_m: float = Field(
        1.0, ge=0, le=10, description="Service loop and routing slack per cable, metres."
    )
    racks_per_row: int = Field(
        20,
        ge=2,
        le=100,
        description="Most racks in one row of the hall; the shared network racks wrap after it.",
    )


class DevicePower(StrictModel):
    """A device's measured or contracted power, replacing the catalog's for the power budgets."""

    typical_kw: float | None = Field(
        None, gt=0, le=1000, description="Typical draw, kW (the band's low edge)."
    )
    max_kw: float | None = Field(
        None, gt=0, le=1000, description="Maximum draw, kW (what the conservative bound tests)."
    )
    source: Annotated[str, TextRule] | None = Field(
        None,
        min_length=1,
        max_length=200,
        pattern=ONE_LINE,  # free text, shown wherever the figures are
        description="Where the figures come from (a datasheet, a metered reading).",
    )

    @model_validator(mode="after")
    def _typical_within_max(self) -> DevicePower:
        if self.typical_kw is None and self.max_kw is None:
            raise ValueError("give typical_kw, max_kw or both")
        if self.typical_kw and self.max_kw and self.typical_kw > self.max_kw:
            raise ValueError(f"typical_kw {self.typical_kw} exceeds max_kw {self.max_kw}")
        return self


class Site(StrictModel):
    """The data-center site: rack classes, hall layout and address space."""

    rack: Rack = Field(
        default_factory=Rack,
        description="The default rack class (class name `default`): power, space, cooling.",
    )
    rack_classes: dict[Annotated[str, Field(pattern=GROUP_NAME)], Rack] = Field(
        default_factory=dict,
        description="Further rack classes by name; a node group picks one with `rack_class`.",
    )
    network_rack_class: str | None = Field(
        None, description="Rack class of network racks; default the default class."
    )
    layout: Layout = Field(default_factory=Layout, description="Hall geometry.")
    device_power: dict[
        Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9.-]{0,63}$")], DevicePower
    ] = Field(
        default_factory=dict,
        description="Per catalog node or switch id (e.g. `qm8790`, `dgx-a100-640gb`), power "
        "figures the power and cost budgets use instead of the catalog's: its typical and "
        "maximum draw. Rack placement keeps the catalog's maximum.",
    )
    management_cidr: Cidr = Field(
        IPv4Network("10.10.0.0/16"), description="In-band management network (host addresses)."
    )
    bmc_cidr: Cidr = Field(
        IPv4Network("10.11.0.0/16"), description="Out-of-band network for BMCs, switches, PDUs."
    )
    address_block_bits: int = Field(
        4,
        ge=1,
        le=12,
        description="Each CIDR is split into 2^bits equal blocks: block 0 for shared "
        "infrastructure, then one block per node group in spec order (stable addresses).",
    )

    @model_validator(mode="after")
    def _default_class_is_reserved(self) -> Site:
        if "default" in self.rack_classes:
            raise ValueError("rack class name 'default' is reserved for site.rack")
        if self.network_rack_class not in (None, "default", *self.rack_classes):
            raise ValueError(
                f"network_rack_class {self.network_rack_class!r} is not a key of site.rack_classes"
            )
        return self

    def rack_class(self, name: str | None) -> Rack:
        """The rack class called ``name`` (None and ``default`` are `rack`)."""
        return self.rack if name in (None, "default") else self.rack_classes[name or ""]
