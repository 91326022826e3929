# shellcheck shell=bash
# What slurmdbd's and MariaDB's entrypoints share (sourced after base.sh).

# A password slurmdbd.conf and SQL can carry as they are (generated ones are hex).
check_db_password() {
  [[ -n "${!ENV_DB_PASSWORD:-}" ]] || die "$ENV_DB_PASSWORD is empty (the database Secret's '$DB_PASSWORD_SECRET_KEY')"
  [[ "${!ENV_DB_PASSWORD}" =~ ^[A-Za-z0-9._~+/=@%-]+$ ]] ||
    die "the database password may hold only letters, digits and ._~+/=@%- (no blanks, quotes or '#')"
}
