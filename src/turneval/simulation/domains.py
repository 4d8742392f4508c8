"""Two small ready-made worlds with scenarios and reference actions: orders, and files.

``orders_world()`` is a shop's order desk (look up, cancel, re-address and refund orders,
with the shop's rules: only a processing order can be cancelled or re-addressed, only a
delivered one refunded, never more than was paid). ``files_world()`` is a small file system
(list, read, write, move, delete). Each comes with scenarios (:func:`orders_scenarios`,
:func:`files_scenarios`) whose ``reference_tool_calls`` are the reference actions: replayed
on a fresh world they reach the reference end state.

This module was ``turneval.worlds.domains``, a path that still imports, with a
``DeprecationWarning`` (worlds sit below the simulation, and these scenarios are the
simulation's).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from turneval.messages import ToolCall
from turneval.simulation._scenarios import Scenario
from turneval.worlds import Faults, ToolWorld

__all__ = [
    "FileSystem",
    "OrderDesk",
    "files_scenarios",
    "files_world",
    "orders_scenarios",
    "orders_world",
]

_ORDERS: dict[str, dict[str, Any]] = {
    "A100": {"status": "processing", "address": "3 Elm St, Leeds", "total": 40.0, "refunded": 0.0},
    "B200": {"status": "shipped", "address": "8 Oak Rd, York", "total": 25.0, "refunded": 0.0},
    "C300": {"status": "processing", "address": "1 Pine Ave, Bath", "total": 60.0, "refunded": 0.0},
    "D400": {"status": "delivered", "address": "5 Ash Ln, Hull", "total": 30.0, "refunded": 0.0},
    "E500": {"status": "shipped", "address": "9 Fir Ct, Ely", "total": 15.0, "refunded": 0.0},
    "F600": {"status": "delivered", "address": "2 Yew Way, Bury", "total": 52.5, "refunded": 0.0},
}


class OrderDesk:
    """A shop's order desk: the orders (``orders``) and the refunds filed (``refunds``)."""

    def __init__(self) -> None:
        """Start from the six sample orders, no refund filed."""
        self.orders: dict[str, dict[str, Any]] = copy.deepcopy(_ORDERS)
        self.refunds: list[dict[str, Any]] = []

    def _order(self, order_id: str) -> dict[str, Any]:
        if order_id not in self.orders:
            raise KeyError(f"no order {order_id}")
        return self.orders[order_id]

    def get_order(self, order_id: str) -> dict[str, Any]:
        """Look up an order: its status, delivery address, total paid and amount refunded."""
        return {"order_id": order_id, **self._order(order_id)}

    def cancel_order(self, order_id: str) -> str:
        """Cancel an order that is still processing (a shipped order cannot be cancelled)."""
        order = self._order(order_id)
        if order["status"] != "processing":
            raise ValueError(f"order {order_id} is {order['status']} and cannot be cancelled")
        order["status"] = "cancelled"
        return f"Order {order_id} is cancelled."

    def update_address(self, order_id: str, address: str) -> str:
        """Change the delivery address of an order that is still processing."""
        order = self._order(order_id)
        if order["status"] != "processing":
            raise ValueError(f"order {order_id} is {order['status']}: its address is fixed")
        order["address"] = address
        return f"Order {order_id} now ships to {address}."

    def refund_order(self, order_id: str, amount: float) -> str:
        """Refund part or all of a delivered order (never more than was paid and not refunded)."""
        order = self._order(order_id)
        if order["status"] != "delivered":
            raise ValueError(f"order {order_id} is {order['status']}: only delivered orders")
        left = order["total"] - order["refunded"]
        if not 0 < amount <= left:
            raise ValueError(f"the refund must be between 0 and {left:.2f}, got {amount:.2f}")
        order["refunded"] += amount
        self.refunds.append({"order_id": order_id, "amount": amount})
        return f"Refunded {amount:.2f} on order {order_id}."


def orders_world(
    *, faults: Faults | Mapping[str, Faults] | None = None, seed: int | str = 0
) -> ToolWorld:
    """The order desk as a world named ``"orders"`` (state: ``orders`` and ``refunds``)."""
    return ToolWorld.from_object(OrderDesk(), name="orders", faults=faults, seed=seed)


def _call(name: str, **args: Any) -> ToolCall:
    return ToolCall(name=name, args=args)


def orders_scenarios(world: ToolWorld | None = None) -> list[Scenario]:
    """Five order-desk scenarios, each with its reference actions (default world: a new one)."""
    world = world or orders_world()
    return [
        Scenario(
            id="cancel",
            goal="Cancel order A100, it is not needed any more.",
            first_message="Please cancel my order A100.",
            user_facts={"order_id": "A100"},
            reference="Order A100 is cancelled.",
            reference_tool_calls=[
                _call("get_order", order_id="A100"),
                _call("cancel_order", order_id="A100"),
            ],
            world=world,
        ),
        Scenario(
            id="address",
            goal="Send order C300 to 12 Mill St, Derby instead.",
            first_message="Please change the address of order C300 to 12 Mill St, Derby.",
            user_facts={"order_id": "C300", "new_address": "12 Mill St, Derby"},
            reference="Order C300 now ships to 12 Mill St, Derby.",
            reference_tool_calls=[
                _call("update_address", order_id="C300", address="12 Mill St, Derby")
            ],
            world=world,
        ),
        Scenario(
            id="refund",
            goal="Get a full refund for order D400, it arrived damaged.",
            first_message="Order D400 arrived damaged, I want a full refund.",
            user_facts={"order_id": "D400"},
            reference="Refunded 30.00 on order D400.",
            reference_tool_calls=[
                _call("get_order", order_id="D400"),
                _call("refund_order", order_id="D400", amount=30.0),
            ],
            world=world,
        ),
        Scenario(
            id="partial_refund",
            goal="Get 12.50 back on order F600 for the broken mug.",
            first_message="The mug in order F600 was broken; please refund its 12.50.",
            user_facts={"order_id": "F600", "amount": "12.50"},
            reference="Refunded 12.50 on order F600.",
            reference_tool_calls=[_call("refund_order", order_id="F600", amount=12.5)],
            world=world,
        ),
        Scenario(
            id="cancel_shipped",
            goal="Cancel order E500.",
            first_message="Cancel order E500, please.",
            user_facts={"order_id": "E500"},
            reference="Order E500 has shipped and cannot be cancelled.",
            reference_tool_calls=[_call("get_order", order_id="E500")],
            world=world,
            max_turns=3,
        ),
    ]


class FileSystem:
    """A small file system: ``files`` maps each path to its text."""

    def __init__(self) -> None:
        """Start with a few notes, a draft report and two logs."""
        self.files: dict[str, str] = {
            "/home/notes.txt": "call the bank\n",
            "/home/draft-report.md": "# Q3 report\n",
            "/tmp/a.log": "started\n",
            "/tmp/b.log": "stopped\n",
        }

    def _existing(self, path: str) -> str:
        if path not in self.files:
            raise FileNotFoundError(f"no file {path}")
        return path

    def list_files(self, directory: str) -> list[str]:
        """The paths of the files under a directory, sorted."""
        prefix = directory.rstrip("/") + "/"
        return sorted(path for path in self.files if path.startswith(prefix))

    def read_file(self, path: str) -> str:
        """A file's text."""
        return self.files[self._existing(path)]

    def write_file(self, path: str, content: str) -> str:
        """Create or overwrite a file with the given text."""
        if not path.startswith("/"):
            raise ValueError(f"paths are absolute, got {path!r}")
        self.files[path] = content
        return f"wrote {len(content)} characters to {path}"

    def move_file(self, source: str, destination: str) -> str:
        """Move (rename) a file; the destination must not exist."""
        self._existing(source)
        if destination in self.files:
            raise FileExistsError(f"{destination} exists")
        self.files[destination] = self.files.pop(source)
        return f"moved {source} to {destination}"

    def delete_file(self, path: str) -> str:
        """Delete a file."""
        del self.files[self._existing(path)]
        return f"deleted {path}"


def files_world(
    *, faults: Faults | Mapping[str, Faults] | None = None, seed: int | str = 0
) -> ToolWorld:
    """The file system as a world named ``"files"`` (state: ``files``)."""
    return ToolWorld.from_object(FileSystem(), name="files", faults=faults, seed=seed)


def files_scenarios(world: ToolWorld | None = None) -> list[Scenario]:
    """Three file-system scenarios, each with its reference actions (default: a new world)."""
    world = world or files_world()
    return [
        Scenario(
            id="archive_notes",
            goal="Move my notes to /home/archive/notes.txt.",
            first_message="Please archive /home/notes.txt as /home/archive/notes.txt.",
            reference="moved /home/notes.txt to /home/archive/notes.txt",
            reference_tool_calls=[
                _call("move_file", source="/home/notes.txt", destination="/home/archive/notes.txt")
            ],
            world=world,
        ),
        Scenario(
            id="todo",
            goal="Create /home/todo.md saying 'buy milk'.",
            first_message="Create /home/todo.md with the text: buy milk",
            reference="wrote 8 characters to /home/todo.md",
            reference_tool_calls=[_call("write_file", path="/home/todo.md", content="buy milk")],
            world=world,
        ),
        Scenario(
            id="clean_tmp",
            goal="Delete every log file in /tmp.",
            first_message="Clean up: delete all the log files in /tmp.",
            reference="deleted /tmp/a.log and /tmp/b.log",
            reference_tool_calls=[
                _call("list_files", directory="/tmp"),
                _call("delete_file", path="/tmp/a.log"),
                _call("delete_file", path="/tmp/b.log"),
            ],
            world=world,
        ),
    ]
