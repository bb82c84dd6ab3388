-- distlock semaphore count: the permits held now, after pruning expired holders. clock.lua and
-- semaphore.lua are put in front of it.
--
-- KEYS[1]  the holders; KEYS[2]  the counts
-- Returns the permits in use.
return prune(KEYS[1], KEYS[2], now_ms())
