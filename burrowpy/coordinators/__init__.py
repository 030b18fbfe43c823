"""Coordinators: the lifecycle base, and the cluster, consumer and ZooKeeper modules."""

from burrowpy.coordinators.base import Coordinator, Module, ModuleFactory

__all__ = ["Coordinator", "Module", "ModuleFactory"]
