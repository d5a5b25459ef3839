"""Tables declared as classes, without SQLAlchemy's ORM.

A subclass of :class:`TableRow` names its table (``__tablename__``, ``__table_args__``) and
its columns as class attributes; the class builds the Core :class:`~sqlalchemy.Table` and
stands for it in statements (``select(SessionRow)``, ``insert(SessionRow)``,
``SessionRow.key == key``). Rows come back as :class:`~sqlalchemy.Row` objects, read by
attribute like the columns. There are no instances, sessions or mappers: the ORM (with the
asyncio extension that imports it) weighed ~7 MiB in every process for statements that are all
Core (docs/performance.md, issue 33).
"""

from __future__ import annotations

from typing import Any, ClassVar, TypeVar

from sqlalchemy import Column, MetaData, Table
from sqlalchemy.sql.expression import ColumnClause
from sqlalchemy.types import TypeEngine

T = TypeVar("T")


def column(
    type_: TypeEngine[T], *args: Any, nullable: bool = False, **kwargs: Any
) -> ColumnClause[T]:
    """A column of a :class:`TableRow`, named after its attribute. NOT NULL unless
    ``nullable=True`` (what the ORM's ``Mapped[X]`` without ``| None`` declared).

    Typed as the :class:`~sqlalchemy.sql.expression.ColumnClause` it is: SQLAlchemy types a
    ``Column`` read on a class as ``Never`` (its typed-columns classes are read through
    ``table.c``), and ours are read on the class (``SessionRow.key``)."""
    return Column(type_, *args, nullable=nullable, **kwargs)


class TableRow:
    """Base of the table classes of one :class:`~sqlalchemy.MetaData` (set ``metadata`` on a
    direct subclass without ``__tablename__``)."""

    metadata: ClassVar[MetaData]
    __tablename__: ClassVar[str]
    __table_args__: ClassVar[tuple[Any, ...]] = ()
    __table__: ClassVar[Table]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "__tablename__" not in vars(cls):
            return  # a base that holds the metadata
        columns = []
        for name, value in vars(cls).items():
            if isinstance(value, Column):
                if value.name is None:
                    value.name = name
                if value.key is None:
                    value.key = name
                columns.append(value)
        cls.__table__ = Table(cls.__tablename__, cls.metadata, *columns, *cls.__table_args__)

    @classmethod
    def __clause_element__(cls) -> Table:
        """What SQLAlchemy uses wherever the class is given as a table."""
        return cls.__table__
