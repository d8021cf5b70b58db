-- What the site's own database role may do: read and write rows, nothing more. It owns no table,
-- so it cannot drop or disable the leakage triggers (ALTER TABLE ... DISABLE TRIGGER, DROP TRIGGER,
-- DROP TABLE and CREATE OR REPLACE FUNCTION all need the owner), nor TRUNCATE a table.
--
-- Run as the owner role (the one that runs the migrations), in the site's database, with the
-- site's role named by the setting probebench.app_role:
--     PGOPTIONS="-c probebench.app_role=probebench_app" psql -U probebench_owner -d probebench -f grants.sql
-- docker/postgres/init-roles.sh runs it when the database is created; it is idempotent.
-- tests/security/test_database_roles.py executes this file as it is.
DO $$
DECLARE
    app   text := current_setting('probebench.app_role');
    owner text := current_user;
BEGIN
    EXECUTE format('GRANT CONNECT, TEMPORARY ON DATABASE %I TO %I', current_database(), app);
    -- the site creates nothing in the schema (PostgreSQL 15 grants PUBLIC no CREATE there either)
    EXECUTE 'REVOKE CREATE ON SCHEMA public FROM PUBLIC';
    EXECUTE format('GRANT USAGE ON SCHEMA public TO %I', app);
    -- the tables and sequences that exist now ...
    EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO %I', app);
    EXECUTE format('GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO %I', app);
    -- ... and those the owner's later migrations create
    EXECUTE format(
        'ALTER DEFAULT PRIVILEGES FOR ROLE %I IN SCHEMA public GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO %I',
        owner, app);
    EXECUTE format(
        'ALTER DEFAULT PRIVILEGES FOR ROLE %I IN SCHEMA public GRANT USAGE, SELECT ON SEQUENCES TO %I',
        owner, app);
END
$$;
