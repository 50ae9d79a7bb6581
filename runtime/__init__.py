"""How stages run: Apache Beam options and runners (the in-process runner, the Dask runner), worker start-up
and the heap settings that keep long runs flat."""
