-- Tether's PostgreSQL roles. Run once, as a superuser, connected to the database `tether`
-- (CREATE DATABASE tether; first). Then give each role a password:
--   ALTER ROLE tether PASSWORD '...';  ALTER ROLE tether_watch PASSWORD '...';
--
--   tether        the operator: creates runs, runs them, stops them, decides (read/write).
--                 It owns the schema `tether`, where the store makes its tables on first use.
--   tether_watch  the watcher: lists and watches runs (read-only: SELECT, nothing else).
--
-- Ownership of a run is a session advisory lock, so the operator needs a direct session
-- (or a session-mode pooler); the watcher reads liveness from pg_locks, which anyone may.

CREATE ROLE tether LOGIN;
CREATE ROLE tether_watch LOGIN;
REVOKE ALL ON DATABASE tether FROM PUBLIC;
GRANT CONNECT ON DATABASE tether TO tether, tether_watch;
CREATE SCHEMA tether AUTHORIZATION tether;
GRANT USAGE ON SCHEMA tether TO tether_watch;
-- Tables the operator makes later are readable by the watcher, and by no one else.
ALTER DEFAULT PRIVILEGES FOR ROLE tether IN SCHEMA tether GRANT SELECT ON TABLES TO tether_watch;
-- The worker queue (tether worker, tether submit): DBOS keeps its tables in the schema
-- `dbos`, made and migrated by the operator's first worker; the watcher reads the queue.
CREATE SCHEMA dbos AUTHORIZATION tether;
GRANT USAGE ON SCHEMA dbos TO tether_watch;
ALTER DEFAULT PRIVILEGES FOR ROLE tether IN SCHEMA dbos GRANT SELECT ON TABLES TO tether_watch;
ALTER ROLE tether SET search_path = tether;
ALTER ROLE tether_watch SET search_path = tether;
