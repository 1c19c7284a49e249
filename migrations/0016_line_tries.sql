-- A spelling asked for a line and given none (its item left out, empty or malformed, the whole reply not the
-- contract's JSON, or the request refused for its content) is kept as a row with an empty line, as before,
-- and now with how many requests gave it none and why the last did. It is asked again until `tries` reaches
-- describe.max_tries, then waits for its key (carriers, model, prompt) to change (passes/describe.py).
-- Empty lines written before this column count as one try: they are asked again.
ALTER TABLE lines ADD COLUMN tries INTEGER NOT NULL DEFAULT 1;
ALTER TABLE lines ADD COLUMN why TEXT NOT NULL DEFAULT '';
