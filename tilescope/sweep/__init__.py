"""``tilescope sweep``: one model (or workload script) captured at every point of a grid of run options.

``grid`` turns the command line into points (each a ``tilescope run`` command line, parsed and checked
by ``run``'s own parser); ``point`` computes one point in a Dask worker (capture, figures from the
summary views, a record beside the report); ``cluster`` makes the Dask client (a LocalCluster sized to
the machine, or an existing scheduler); ``commands/sweep`` drives them and writes the sweep table.
"""
