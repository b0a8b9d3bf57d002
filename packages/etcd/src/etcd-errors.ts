import { BackendUnavailableError, BatonError, ConfigError, SessionLostError } from "@baton/core";
import {
  EtcdAuthenticationFailedError,
  EtcdLeaseInvalidError,
  EtcdPermissionDeniedError,
  EtcdRoleNotGrantedError,
} from "etcd3";

/**
 * Maps an error of the etcd3 client to Baton's named errors: a lost lease is a
 * `SessionLostError`, bad credentials or permissions a `ConfigError` (retrying cannot help),
 * anything else a `BackendUnavailableError` (never "held").
 */
export function toBatonError(error: unknown, context: string): BatonError {
  if (error instanceof BatonError) return error;
  const detail = error instanceof Error ? error.message : String(error);
  if (error instanceof EtcdLeaseInvalidError || /lease not found/i.test(detail)) {
    return new SessionLostError(`${context}: the etcd lease is gone (${detail})`, {
      cause: error,
    });
  }
  if (
    error instanceof EtcdAuthenticationFailedError ||
    error instanceof EtcdPermissionDeniedError ||
    error instanceof EtcdRoleNotGrantedError
  ) {
    return new ConfigError("credentials", `${context}: etcd refused them (${detail})`, {
      cause: error,
    });
  }
  return new BackendUnavailableError(`${context}: ${detail}`, { cause: error });
}
