"""Tables declared as classes without the ORM (bot/storage/_table.py)."""

from __future__ import annotations

from typing import ClassVar

from sqlalchemy import Integer, MetaData, String, create_engine, insert, select, update

from bot.storage._table import TableRow, column
from bot.storage.models import Base, SessionRow


class _Base(TableRow):
    metadata: ClassVar[MetaData] = MetaData()


class _Note(_Base):
    __tablename__ = "notes"

    id = column(Integer(), primary_key=True)
    title = column(String(40))
    body = column(String(200), nullable=True)
    stars = column(Integer(), default=0)


def test_columns_are_named_after_their_attributes_and_not_null_unless_said() -> None:
    table = _Note.__table__
    assert table.name == "notes" and table.metadata is _Base.metadata
    assert [c.name for c in table.c] == ["id", "title", "body", "stars"]
    assert {c.name: c.nullable for c in table.c} == {
        "id": False,
        "title": False,
        "body": True,
        "stars": False,
    }
    assert _Note.title is table.c.title  # the class attribute is the table's column


def test_a_base_without_a_table_name_builds_no_table() -> None:
    assert "__table__" not in vars(_Base)
    assert "__table__" not in vars(Base)
    assert set(_Base.metadata.tables) == {"notes"}


def test_the_class_stands_for_its_table_in_statements_and_rows_read_by_attribute() -> None:
    engine = create_engine("sqlite://")
    _Base.metadata.create_all(engine)
    with engine.begin() as conn:
        conn.execute(insert(_Note).values(id=1, title="first"))
        conn.execute(update(_Note).where(_Note.id == 1).values(stars=_Note.stars + 2))
        row = conn.execute(select(_Note).where(_Note.title == "first")).one()
    assert (row.id, row.title, row.body, row.stars) == (1, "first", None, 2)  # default applied


def test_the_models_import_no_orm() -> None:
    assert not hasattr(SessionRow, "__mapper__")
    assert SessionRow.__table__.c.summary.nullable and not SessionRow.__table__.c.model.nullable
