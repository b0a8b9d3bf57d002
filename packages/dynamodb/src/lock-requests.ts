import type {
  AttributeValue,
  DeleteItemCommandInput,
  PutItemCommandInput,
  UpdateItemCommandInput,
} from "@aws-sdk/client-dynamodb";
import { ATTR, encodeKey, encodeNumber, encodeSession, encodeString } from "./dynamodb-codec.js";
import { PARTITION_KEY } from "./dynamodb-keys.js";

/**
 * The writes of the lock protocol, each one conditional request on one item. Every attribute
 * name goes through `#names` (several are DynamoDB reserved words).
 */

const NAMES = {
  "#pk": PARTITION_KEY,
  "#session": ATTR.session,
  "#owner": ATTR.owner,
  "#value": ATTR.value,
  "#token": ATTR.token,
  "#beat": ATTR.beat,
} as const;

/** Whom a grant may take the lock from: nobody (free, or ours already), or a dead session. */
export type GrantFrom = { readonly free: true } | { readonly session: string };

/**
 * The grant: sets the holding session, owner and published value and raises the fencing
 * counter by one, in one conditional update, and returns the new counter (the token). The
 * condition: the lock is free (or held by this very session: a retried grant whose reply was
 * lost, or a release that did not reach the table), or, for a takeover, still held by the
 * session found dead.
 */
export function grantRequest(
  table: string,
  key: string,
  session: string,
  ownerId: string,
  value: string | undefined,
  from: GrantFrom,
): UpdateItemCommandInput {
  const set = `SET #session = :me, #owner = :owner${value === undefined ? "" : ", #value = :value"}`;
  return {
    TableName: table,
    Key: encodeKey(key),
    UpdateExpression: `${set} ADD #token :one${value === undefined ? " REMOVE #value" : ""}`,
    ConditionExpression:
      "session" in from ? "#session = :dead" : "attribute_not_exists(#session) OR #session = :me",
    ExpressionAttributeNames: {
      "#session": NAMES["#session"],
      "#owner": NAMES["#owner"],
      "#value": NAMES["#value"],
      "#token": NAMES["#token"],
    },
    ExpressionAttributeValues: {
      ":me": encodeString(session),
      ":owner": encodeString(ownerId),
      ":one": encodeNumber(1),
      ...(value === undefined ? {} : { ":value": encodeString(value) }),
      ...("session" in from ? { ":dead": encodeString(from.session) } : {}),
    },
    ReturnValues: "UPDATED_NEW",
    // DynamoDB sends the item back with a failed condition (one read fewer); dynalite does not.
    ReturnValuesOnConditionCheckFailure: "ALL_OLD",
  };
}

/**
 * The release: removes the holder (the counter stays, so tokens keep rising), on condition
 * that this session still holds the lock with this token. `token: null` (a grant whose reply
 * was lost) checks the session only.
 */
export function releaseRequest(
  table: string,
  key: string,
  session: string,
  token: bigint | null,
): UpdateItemCommandInput {
  return {
    TableName: table,
    Key: encodeKey(key),
    UpdateExpression: "REMOVE #session, #owner, #value",
    ConditionExpression: token === null ? "#session = :me" : "#session = :me AND #token = :token",
    ExpressionAttributeNames: {
      "#session": NAMES["#session"],
      "#owner": NAMES["#owner"],
      "#value": NAMES["#value"],
      ...(token === null ? {} : { "#token": NAMES["#token"] }),
    },
    ExpressionAttributeValues: {
      ":me": encodeString(session),
      ...(token === null ? {} : { ":token": encodeNumber(token) }),
    },
  };
}

/** Opens a session: its item, on condition that no item has its (random) key. */
export function openRequest(
  table: string,
  key: string,
  ownerId: string,
  ttlMs: number,
  now: number = Date.now(),
): PutItemCommandInput {
  return {
    TableName: table,
    Item: encodeSession(key, ownerId, ttlMs, now),
    ConditionExpression: "attribute_not_exists(#pk)",
    ExpressionAttributeNames: { "#pk": NAMES["#pk"] },
  };
}

/**
 * The renewal of a session and every lock it holds: raises the session's renewal counter and
 * sets `renewedAt` to `now` (the wall clock, for operators), on condition that its item is
 * still there, and returns the item (with any revocation note a forced release left there:
 * read in the same request). `remove` are revocation notes an earlier renewal already
 * returned: removed by this one.
 */
export function renewRequest(
  table: string,
  key: string,
  remove: readonly string[] = [],
  now: number = Date.now(),
): UpdateItemCommandInput {
  const removed = Object.fromEntries(remove.map((attribute, i) => [`#r${i}`, attribute]));
  const names = Object.keys(removed);
  return {
    TableName: table,
    Key: encodeKey(key),
    UpdateExpression: `SET #at = :now ADD #beat :one${names.length === 0 ? "" : ` REMOVE ${names.join(", ")}`}`,
    ConditionExpression: "attribute_exists(#pk)",
    ExpressionAttributeNames: {
      "#pk": NAMES["#pk"],
      "#beat": NAMES["#beat"],
      "#at": ATTR.renewedAt,
      ...removed,
    },
    ExpressionAttributeValues: { ":one": encodeNumber(1), ":now": encodeNumber(Math.floor(now)) },
    ReturnValues: "ALL_NEW",
  };
}

/**
 * A forced release's note to the holding session: sets the revocation attribute on the
 * session's item, on condition that the item is still there (a session gone holds nothing).
 */
export function revokeRequest(
  table: string,
  sessionItem: string,
  attribute: string,
  note: AttributeValue,
): UpdateItemCommandInput {
  return {
    TableName: table,
    Key: encodeKey(sessionItem),
    UpdateExpression: "SET #note = :note",
    ConditionExpression: "attribute_exists(#pk)",
    ExpressionAttributeNames: { "#pk": NAMES["#pk"], "#note": attribute },
    ExpressionAttributeValues: { ":note": note },
  };
}

/** Takes a revocation note back (its forced release found the grant gone), if still there. */
export function unrevokeRequest(
  table: string,
  sessionItem: string,
  attribute: string,
): UpdateItemCommandInput {
  return {
    TableName: table,
    Key: encodeKey(sessionItem),
    UpdateExpression: "REMOVE #note",
    ConditionExpression: "attribute_exists(#note)",
    ExpressionAttributeNames: { "#note": attribute },
  };
}

/**
 * Ends another client's session found expired: deletes its item on condition that its
 * renewal counter is still the one seen a whole TTL ago (a renewal since then keeps it).
 */
export function expireRequest(table: string, key: string, beat: string): DeleteItemCommandInput {
  return {
    TableName: table,
    Key: encodeKey(key),
    ConditionExpression: "#beat = :beat",
    ExpressionAttributeNames: { "#beat": NAMES["#beat"] },
    ExpressionAttributeValues: { ":beat": { N: beat } },
  };
}

/** Closes this session: deletes its item, which frees every lock that points at it. */
export function closeRequest(table: string, key: string): DeleteItemCommandInput {
  return { TableName: table, Key: encodeKey(key) };
}
