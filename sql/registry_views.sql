-- Views over the sqlrp registry, for reading stored projections with plain SQL (DuckDB and PostgreSQL).
-- Run this file once in a database whose registry exists (any sqlrp command creates it).

-- One row per stored projection: its shape and the density of its linear stage (1/s for Achlioptas).
CREATE OR REPLACE VIEW sqlrp_projection_summary AS
SELECT p.name,
       p.method,
       p.d,
       p.k,
       p.p,
       count(e.feature) AS nnz,
       CAST(count(e.feature) AS DOUBLE PRECISION) / (CAST(p.d AS DOUBLE PRECISION) * p.p) AS density,
       p.scale,
       p.seed,
       p.created_at
FROM sqlrp_projection p
LEFT JOIN sqlrp_linear_entry e ON e.projection = p.name
GROUP BY p.name, p.method, p.d, p.k, p.p, p.scale, p.seed, p.created_at;

-- The linear stage of every projection as (projection, vector, feature, sign): for sign matrices the
-- projection is f_v(x) = scale * (sum of x_feature with sign +1 - sum with sign -1) (000 Eq. 2-3).
CREATE OR REPLACE VIEW sqlrp_signs AS
SELECT projection,
       vector,
       feature,
       CASE WHEN weight > 0 THEN 1 WHEN weight < 0 THEN -1 ELSE 0 END AS sign
FROM sqlrp_linear_entry;
