-- An identity recorded before its delivery reached an outcome (it stopped
-- to be decided by the agent, or a crash came between) had 'pending' in
-- its outcome column, which is not an outcome: the column is now empty
-- until the outcome is written.
UPDATE seqbox_inbox SET outcome = '' WHERE outcome = 'pending'
