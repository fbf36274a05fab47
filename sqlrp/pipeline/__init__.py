"""From an input to a projected output: the input resolved (:mod:`.sources`), what the plan needs from
the database gathered once (:mod:`.plan`, :mod:`.moments`), the SQL run or written to files
(:mod:`.materialise`) and the results returned as frames (:mod:`.outputs`)."""
