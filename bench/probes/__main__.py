"""One-off measurements behind statements in the docs and the code (not part of run.py), one module per
topic: postgres, duckdb_sql, tables, methods, search, streams.

    PYTHONPATH=. python -m bench.probes pg-copy      # PostgreSQL: storing 156,800 matrix rows, COPY block vs rows
    PYTHONPATH=. python -m bench.probes pg-read      # PostgreSQL: reading 50,000 x 200 results, binary COPY vs rows
    PYTHONPATH=. python -m bench.probes planning     # DuckDB planning of a big kernel projection, CSE on/off
    PYTHONPATH=. python -m bench.probes pg-array     # PostgreSQL array layout: detoast, fence and parallel variants
    PYTHONPATH=. python -m bench.probes pg-fence     # PostgreSQL mailman / kernel relations: OFFSET 0 vs the new fence
    PYTHONPATH=. python -m bench.probes scatter      # DuckDB cost of sums over scattered vs few columns
    PYTHONPATH=. python -m bench.probes dtrp         # DT-RP wall time, n=500, d=784, k=200, 4000 iterations
    PYTHONPATH=. python -m bench.probes pairs        # additions per row: inline vs the pairs plan, planning time
    PYTHONPATH=. python -m bench.probes footprint    # DuckDB ns per addition vs the number of addition nodes
    PYTHONPATH=. python -m bench.probes roundtrip    # the round trip's parts: fetch, transform, write back
    PYTHONPATH=. python -m bench.probes pg-insert    # PostgreSQL: CREATE TABLE AS vs INSERT, serial vs staged
    PYTHONPATH=. python -m bench.probes progress     # DuckDB: no bar, the engine-reported bar, 10 id-range batches
    PYTHONPATH=. python -m bench.probes pg-check     # PostgreSQL NULL/NaN check: LIMIT 5 (serial) vs count (parallel)
    PYTHONPATH=. python -m bench.probes floor        # s = sqrt(d): DuckDB's least possible time vs the peers
    PYTHONPATH=. python -m bench.probes overhead     # s = 3: DuckDB's parse, bind and optimise time per strategy
    PYTHONPATH=. python -m bench.probes orientation  # pairs planned on the matrix vs on its transpose, in DuckDB
    PYTHONPATH=. python -m bench.probes worth        # pairs planning time vs its gain; DuckDB's cost per term
    PYTHONPATH=. python -m bench.probes small        # small wide tables: inline vs unnested lookup; the CLI
    PYTHONPATH=. python -m bench.probes highd        # every method on 64 x 6,830 through the CLI: time, peak RSS
    PYTHONPATH=. python -m bench.probes reference    # the NumPy reference's parts on PK-RP: BLAS vs scipy.sparse
    PYTHONPATH=. python -m bench.probes kernel-floor # PK-RP: DuckDB's floor against the author's algorithm
    PYTHONPATH=. python -m bench.probes search-exact # exact k-NN brute force in DuckDB: sqlrp's SQL vs hand-written
    PYTHONPATH=. python -m bench.probes pg-bands     # PostgreSQL: an index's band rows, UNION ALL vs UNNEST
    PYTHONPATH=. python -m bench.probes search-small # search on 50,000 rows: time against probes, SQL alone
    PYTHONPATH=. python -m bench.probes parquet-stream  # DuckDB streaming large Parquet chunks under a memory limit

Each prints seconds measured in this run; nothing is asserted.
"""

from __future__ import annotations

import argparse
import sys

from . import duckdb_sql, methods, postgres, search, tables
from .duckdb_sql import floor, footprint, orientation, overhead, pairs, planning, progress, scatter, worth
from .methods import dtrp, kernel_floor, reference_speed
from .postgres import pg_array, pg_check, pg_copy, pg_fence, pg_insert, pg_read
from .search import rabitq, search_exact, search_small
from .streams import parquet_stream
from .tables import highd, roundtrip, small

PROBES = {
    "rabitq": rabitq,
    "search-exact": search_exact,
    "search-small": search_small,
    "pg-copy": pg_copy,
    "pg-read": pg_read,
    "planning": planning,
    "pg-array": pg_array,
    "pg-fence": pg_fence,
    "scatter": scatter,
    "dtrp": dtrp,
    "pairs": pairs,
    "footprint": footprint,
    "roundtrip": roundtrip,
    "pg-insert": pg_insert,
    "progress": progress,
    "pg-check": pg_check,
    "floor": floor,
    "overhead": overhead,
    "orientation": orientation,
    "worth": worth,
    "small": small,
    "highd": highd,
    "reference": reference_speed,
    "kernel-floor": kernel_floor,
    "parquet-stream": parquet_stream,
}


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.probes", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("probe", choices=sorted(PROBES))
    PROBES[parser.parse_args(sys.argv[1:2]).probe]()


__all__ = ["PROBES", "duckdb_sql", "methods", "postgres", "search", "tables"]

if __name__ == "__main__":
    main()
