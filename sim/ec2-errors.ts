/**
 * EC2 API errors as the Query API returns them: an error code, a message, and the HTTP
 * status AWS uses (AWS EC2 API Reference, "Error codes for the Amazon EC2 API": client
 * errors 400; server errors 500/503; `RequestLimitExceeded` is returned with 503).
 */

/** Server-side codes and their HTTP statuses; every other code is a 400 client error. */
const SERVER_STATUS: Readonly<Record<string, number>> = {
  InternalError: 500,
  InternalFailure: 500,
  ServiceUnavailable: 503,
  Unavailable: 503,
  RequestLimitExceeded: 503,
};

/** HTTP status for an EC2 error code (400 unless it is a server/throttling code). */
export function httpStatusForCode(code: string): number {
  return SERVER_STATUS[code] ?? 400;
}

/** An EC2 error to be rendered as `<Response><Errors><Error>…`. */
export class Ec2ApiError extends Error {
  readonly status: number;

  /** @param code EC2 error code, e.g. `InvalidNetworkInterfaceID.NotFound`. */
  constructor(
    readonly code: string,
    message: string,
    status?: number,
  ) {
    super(message);
    this.name = 'Ec2ApiError';
    this.status = status ?? httpStatusForCode(code);
  }
}

/** Shorthand for `InvalidParameterValue`. */
export function invalidParameter(message: string): Ec2ApiError {
  return new Ec2ApiError('InvalidParameterValue', message);
}

/** Shorthand for `MissingParameter` naming the parameter. */
export function missingParameter(name: string): Ec2ApiError {
  return new Ec2ApiError('MissingParameter', `The request must contain the parameter ${name}`);
}

/** `InvalidNetworkInterfaceID.NotFound` for one or more ids. */
export function eniNotFound(ids: string[]): Ec2ApiError {
  const list = ids.map((i) => `'${i}'`).join(', ');
  return new Ec2ApiError(
    'InvalidNetworkInterfaceID.NotFound',
    `The networkInterface ID${ids.length > 1 ? 's' : ''} ${list} do${ids.length > 1 ? '' : 'es'} not exist`,
  );
}
