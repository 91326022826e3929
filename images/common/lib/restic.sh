# shellcheck shell=bash disable=SC2034 # the variables are the roles' that source this
# What the backup and restore roles share (sourced after base.sh): restic's repository and
# password from the SLURMKUBE_ variables (the password then out of the environment the role's
# children see by that name), restic's exit statuses, the database client's connection.

export RESTIC_REPOSITORY="${!ENV_BACKUP_REPOSITORY:-}" RESTIC_PASSWORD="${!ENV_BACKUP_PASSWORD:-}"
export RESTIC_CACHE_DIR="$BACKUP_CACHE_DIR"
unset "$ENV_BACKUP_PASSWORD"

# restic's exit statuses (restic(1)): no repository there; and restic backup's when it saved the
# snapshot but could not read some files.
RESTIC_NO_REPOSITORY=10
RESTIC_INCOMPLETE=3

# The role's settings are there, else it stops naming them.
require_repository() { # VARIABLE...
  local name missing=()
  for name in "$@" "$ENV_BACKUP_REPOSITORY"; do
    [[ -n "${!name:-}" ]] || missing+=("$name")
  done
  [[ -n $RESTIC_PASSWORD ]] || missing+=("$ENV_BACKUP_PASSWORD")
  ((${#missing[@]} == 0)) || die "${missing[*]} must be set"
}

# Whether the repository opens: 0, or restic's status with its words in REPOSITORY_PROBLEM. Not the
# repository itself in the log: a URL may carry a login.
open_repository() {
  local status=0
  REPOSITORY_PROBLEM=$(restic cat config 2>&1 >/dev/null) || status=$?
  return "$status"
}

# The database client's connection options (slurmdbd's database; its CA for an external one over
# TLS). The password goes through the client's environment (MYSQL_PWD), never its command line.
database_options() {
  DATABASE_OPTIONS=(--host="${!ENV_DB_HOST}" --port="${!ENV_DB_PORT}" --user="${!ENV_DB_USER}")
  [[ -z "${!ENV_DB_CA_FILE:-}" ]] || DATABASE_OPTIONS+=(--ssl-ca="${!ENV_DB_CA_FILE}" --ssl-verify-server-cert)
}
