-- Which kind of judge gave a verdict, cached a reply or ran a pass's session: anthropic, scripted or
-- mechanical (exact duplicates). A verdict binds only its own kind: the scripted judge's defaults must
-- never count as answers for the real judge, nor feed its throttle. Older rows say it in their model.
ALTER TABLE verdicts ADD COLUMN judge TEXT NOT NULL DEFAULT 'anthropic';
UPDATE verdicts SET judge = 'scripted' WHERE model LIKE 'scripted:%';
UPDATE verdicts SET judge = 'mechanical' WHERE pass = 'exact';
CREATE INDEX verdicts_judge ON verdicts (pass, judge, fingerprint);

ALTER TABLE replies ADD COLUMN judge TEXT NOT NULL DEFAULT 'anthropic';
UPDATE replies SET judge = 'scripted' WHERE model LIKE 'scripted:%';

ALTER TABLE throttle ADD COLUMN judge TEXT NOT NULL DEFAULT 'anthropic';
UPDATE throttle SET judge = 'scripted' WHERE session IN (SELECT session FROM verdicts WHERE judge = 'scripted');
