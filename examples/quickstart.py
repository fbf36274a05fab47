"""Quick start: store a projection, project a table inside DuckDB, compare with the NumPy path.

python examples/quickstart.py
"""

import numpy as np
import pandas as pd
from sklearn.datasets import load_breast_cancer
from sklearn.preprocessing import StandardScaler

import sqlrp

X = StandardScaler().fit_transform(load_breast_cancer().data)  # 569 x 30, real data
frame = pd.DataFrame(X, columns=[f"feature {i}" for i in range(X.shape[1])])
frame.insert(0, "patient_id", np.arange(len(X)))

db = sqlrp.connect()  # in-memory DuckDB; sqlrp.connect("duckdb:///file.db") or "postgresql://..." also work
db.write_dataframe("patients", frame)

# generate + store a very sparse Achlioptas matrix (s = sqrt(d)), then project in SQL
sqlrp.create_projection(db, "bc_k20", "achlioptas", d=30, k=20, s="auto", seed=42)
projected = sqlrp.project(db, "patients", "patient_id", "bc_k20")  # a pandas DataFrame
print(projected.head())

# the same numbers in memory, from the same stored matrix
model = sqlrp.SQLRandomProjection(projection=sqlrp.load_projection(db, "bc_k20")).fit(X)
print("max |SQL - NumPy|:", np.abs(projected.drop(columns="patient_id").to_numpy() - model.transform(X)).max())

# the SQL itself, for another engine
plan = sqlrp.plan(db, "patients", "patient_id", "bc_k20")
print(sqlrp.compile_projection(db, plan, dialect="spark")[:400], "...")
