"""The Job controller (upstream's ``pkg/controller/job``), one module per upstream file."""

from ksched.controllers.job.controller import JobController

__all__ = ["JobController"]
