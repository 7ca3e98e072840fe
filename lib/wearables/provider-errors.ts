/** Why a provider fetch failed, in the reference's historical-pull error vocabulary. */
export const RETRIABLE_PULL_ERRORS = ['provider_rate_limit_exceeded', 'provider_unavailable', 'transport_failure', 'resource_contention'] as const;
export const NON_RETRIABLE_PULL_ERRORS = ['non_retriable_error', 'unexpected_error', 'retry_quota_exhausted'] as const;
/** Failures that mean the connection itself is broken (the user must reconnect): `provider.connection.error`. */
export const CONNECTION_ERRORS = ['token_refresh_failed', 'provider_credential_error', 'provider_password_expired', 'deregistered_per_provider'] as const;

export class ProviderFetchError extends Error {
  constructor(
    readonly errorType: string,
    message: string,
  ) {
    super(message);
  }
  get retriable(): boolean {
    return (RETRIABLE_PULL_ERRORS as readonly string[]).includes(this.errorType);
  }
  get breaksConnection(): boolean {
    return (CONNECTION_ERRORS as readonly string[]).includes(this.errorType);
  }
}
