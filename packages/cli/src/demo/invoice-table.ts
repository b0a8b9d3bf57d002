/** One invoice row of the story's `invoices` table. */
export interface Invoice {
  readonly clientId: number;
  readonly month: string;
  readonly amountCents: number;
  /** The fencing token of the lock the writer held (or thought it held). */
  readonly token: bigint;
  /** Which runner wrote it. */
  readonly runner: string;
}

/** What an insert did: a new row, or a row the primary key swallowed. */
export type InsertResult = "inserted" | "duplicate";

/** Options of {@link InvoiceTable}. */
export interface InvoiceTableOptions {
  /** Sees every insert that reaches the table, before the key decides (the demo's audit). */
  readonly onInsert?: (invoice: Invoice) => void;
}

/**
 * The story's billing database, in memory: `PRIMARY KEY (client_id, month)` with
 * `INSERT ... ON CONFLICT DO NOTHING`, plus the "the night's run is done" flag. It keeps the
 * inserts the key swallowed, so the demo can count the clients who would have been billed twice.
 */
export class InvoiceTable {
  readonly #rows = new Map<string, Invoice>();
  readonly #swallowed: Invoice[] = [];
  readonly #done = new Set<string>();
  readonly #onInsert: ((invoice: Invoice) => void) | undefined;

  constructor(options?: InvoiceTableOptions) {
    this.#onInsert = options?.onInsert;
  }

  /** `INSERT ... ON CONFLICT (client_id, month) DO NOTHING`. */
  insert(invoice: Invoice): InsertResult {
    this.#onInsert?.(invoice);
    const key = `${invoice.clientId}/${invoice.month}`;
    if (this.#rows.has(key)) {
      this.#swallowed.push(invoice);
      return "duplicate";
    }
    this.#rows.set(key, invoice);
    return "inserted";
  }

  /** The clients of `clientIds`, in order, with no invoice for `month` yet. */
  unbilled(month: string, clientIds: readonly number[]): number[] {
    return clientIds.filter((clientId) => !this.#rows.has(`${clientId}/${month}`));
  }

  /** How many clients have an invoice for `month`. */
  billed(month: string): number {
    return [...this.#rows.values()].filter((row) => row.month === month).length;
  }

  /** Clients billed more than once for `month`: the inserts the primary key had to swallow. */
  duplicateClients(month: string): number[] {
    const clients = new Set(
      this.#swallowed.filter((i) => i.month === month).map((i) => i.clientId),
    );
    return [...clients].sort((a, b) => a - b);
  }

  /** Marks tonight's run for `month` as done: every scheduler stops trying. */
  markDone(month: string): void {
    this.#done.add(month);
  }

  isDone(month: string): boolean {
    return this.#done.has(month);
  }
}
