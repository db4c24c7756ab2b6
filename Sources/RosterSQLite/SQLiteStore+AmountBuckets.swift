internal import GRDB
internal import RosterDomain

extension SQLiteStore {
  // MARK: Amount buckets (v9)

  /// Sales counted per department, per year (`Y2024`) and per month (`M2024-03`), per amount
  /// bucket (`AmountBuckets`): what a median over any date range adds up instead of reading
  /// every sale. About 211 buckets for the demo's $20 to $5,000, so at most one row per
  /// period, department and bucket: 1.5M rows for 36 years of 15 departments, read a few
  /// thousand at a time.
  ///
  /// Kept like `sales_daily_department`: by the sales triggers, with an employee's sales
  /// settled before the employee goes (the cascaded sale deletes then find no department),
  /// and moved when the employee changes department. A row whose count reaches 0 goes.
  ///
  /// The amounts' index and the dates' index also carry the employee (and the date), so
  /// reading a bucket's amounts, or the amounts of a few days, in a department visits no
  /// table row.
  static let amountBucketsSchema = """
    DROP INDEX sales_by_amount;
    CREATE INDEX sales_by_amount ON sales(amount_cents, date, employee_id);
    DROP INDEX sales_by_date;
    CREATE INDEX sales_by_date ON sales(date, amount_cents, employee_id);

    CREATE TABLE sales_amount_buckets (
      period     TEXT    NOT NULL,
      department TEXT    NOT NULL,
      bucket     INTEGER NOT NULL,
      count      INTEGER NOT NULL,
      PRIMARY KEY (period, department, bucket)
    ) WITHOUT ROWID;
    INSERT INTO sales_amount_buckets
      SELECT \(Self.period("s.date")), e.department, \(AmountBuckets.sql("s.amount_cents")), count(*)
      FROM sales s JOIN employees e ON e.id = s.employee_id, \(Self.periodKinds)
      GROUP BY 1, 2, 3;

    CREATE TRIGGER sales_amount_buckets_insert AFTER INSERT ON sales BEGIN
      INSERT INTO sales_amount_buckets (period, department, bucket, count)
        SELECT \(Self.period("new.date")), e.department, \(AmountBuckets.sql("new.amount_cents")), 1
        FROM employees e, \(Self.periodKinds)
        WHERE e.id = new.employee_id
        ON CONFLICT (period, department, bucket) DO UPDATE SET count = count + 1;
    END;
    CREATE TRIGGER sales_amount_buckets_delete AFTER DELETE ON sales BEGIN
      UPDATE sales_amount_buckets SET count = count - 1
        WHERE period IN ('Y' || substr(old.date, 1, 4), 'M' || substr(old.date, 1, 7))
          AND department = (SELECT department FROM employees WHERE id = old.employee_id)
          AND bucket = \(AmountBuckets.sql("old.amount_cents"));
      DELETE FROM sales_amount_buckets
        WHERE period IN ('Y' || substr(old.date, 1, 4), 'M' || substr(old.date, 1, 7))
          AND department = (SELECT department FROM employees WHERE id = old.employee_id)
          AND bucket = \(AmountBuckets.sql("old.amount_cents")) AND count = 0;
    END;
    CREATE TRIGGER sales_amount_buckets_employee_delete BEFORE DELETE ON employees BEGIN
      \(Self.takeEmployeeBuckets(id: "old.id"))
    END;
    CREATE TRIGGER sales_amount_buckets_move AFTER UPDATE OF department ON employees
    WHEN old.department IS NOT new.department BEGIN
      \(Self.takeEmployeeBuckets(id: "new.id"))
      INSERT INTO sales_amount_buckets (period, department, bucket, count)
        SELECT \(Self.period("s.date")), new.department, \(AmountBuckets.sql("s.amount_cents")), count(*)
        FROM sales s, \(Self.periodKinds)
        WHERE s.employee_id = new.id
        GROUP BY 1, 3
        ON CONFLICT (period, department, bucket) DO UPDATE SET count = count + excluded.count;
    END;
    """

  /// Two rows to join each sale with, once for its year and once for its month (`period`).
  static let periodKinds = "(SELECT 1 AS year UNION ALL SELECT 0) k"

  /// The period of a sale dated `date` joined with `periodKinds`: `Y2024` or `M2024-03`.
  static func period(_ date: String) -> String {
    "CASE k.year WHEN 1 THEN 'Y' || substr(\(date), 1, 4) ELSE 'M' || substr(\(date), 1, 7) END"
  }

  /// Takes the sales of employee `id` out of the counts of `old.department`.
  private static func takeEmployeeBuckets(id: String) -> String {
    """
    UPDATE sales_amount_buckets SET count = sales_amount_buckets.count - d.count
        FROM (SELECT \(Self.period("s.date")) AS period, \(AmountBuckets.sql("s.amount_cents")) AS bucket,
                     count(*) AS count
              FROM sales s, \(Self.periodKinds)
              WHERE s.employee_id = \(id) GROUP BY 1, 2) AS d
        WHERE sales_amount_buckets.period = d.period
          AND sales_amount_buckets.department = old.department
          AND sales_amount_buckets.bucket = d.bucket;
      DELETE FROM sales_amount_buckets
        WHERE period IN (SELECT 'Y' || substr(date, 1, 4) FROM sales WHERE employee_id = \(id)
                         UNION SELECT 'M' || substr(date, 1, 7) FROM sales WHERE employee_id = \(id))
          AND department = old.department AND count = 0;
    """
  }

  // MARK: Medians from the buckets

  /// The amount at an offset within a bucket's amounts in a range (and a department),
  /// from `sales_by_amount` alone. Arguments: the bucket's first and last amount, the range's
  /// first and last day, [the department,] the offset.
  static func bucketAmount(inDepartment: Bool) -> String {
    """
    SELECT s.amount_cents FROM sales s INDEXED BY sales_by_amount
    WHERE s.amount_cents BETWEEN ? AND ? AND s.date BETWEEN ? AND ?\(inDepartment ? Self.inDepartment : "")
    ORDER BY s.amount_cents LIMIT 1 OFFSET ?
    """
  }

  /// A sale's department is `?`: the department's employees are read once, into a list.
  static let inDepartment = " AND s.employee_id IN (\(AnalyticsSQL.departmentEmployees))"

  /// The median of the sales in `filter`'s date range and department (no employee), from the
  /// bucket counts and one bucket's amounts; nil when no sale matches. Runs in a heavy read.
  static func medianFromBuckets(_ db: Database, _ filter: SalesFilter) throws -> Double? {
    let periods = SalesPeriods(from: filter.fromDate, to: filter.toDate)
    var counts: [Int: Int64] = [:]
    func add(_ sql: String, _ arguments: StatementArguments) throws {
      let rows = try Row.fetchCursor(db, sql: sql, arguments: arguments)
      while let row = try rows.next() { counts[row[0], default: 0] += row[1] }
    }
    let department = filter.department == nil ? "" : " AND department = ?"
    let departmentArgument: StatementArguments = filter.department.map { [$0] } ?? []
    for range in periods.bucketPeriods {
      try add(
        "SELECT bucket, sum(count) FROM sales_amount_buckets WHERE period BETWEEN ? AND ?\(department) GROUP BY 1",
        [range.first, range.last] + departmentArgument
      )
    }
    let salesDepartment = filter.department == nil ? "" : Self.inDepartment
    for days in periods.days {
      try add(
        """
        SELECT \(AmountBuckets.sql("s.amount_cents")), count(*) FROM sales s INDEXED BY sales_by_date
        WHERE s.date BETWEEN ? AND ?\(salesDepartment) GROUP BY 1
        """,
        [days.first, days.last] + departmentArgument
      )
    }
    let middle = AmountBuckets.middle(of: counts)
    guard !middle.isEmpty else { return nil }
    var values: [Int64] = []
    for (bucket, offset) in middle {
      let amounts = AmountBuckets.amounts(in: bucket)
      if amounts.lowerBound == amounts.upperBound {
        values.append(amounts.lowerBound)
        continue
      }
      // The bucket's amounts in order, from the amounts' index alone, each checked against
      // the range (and department): a bucket holds a hundredth of the sales or so.
      let value = try Int64.fetchOne(
        db,
        sql: Self.bucketAmount(inDepartment: filter.department != nil),
        arguments: [
          amounts.lowerBound, amounts.upperBound, filter.fromDate ?? StoreLimits.earliestSaleDate,
          filter.toDate ?? "9999-12-31",
        ] + departmentArgument + [offset]
      )
      guard let value else {
        throw StoreError(
          .unavailable,
          "the sales amount counts disagree with the sales; run roster check"
        )
      }
      values.append(value)
    }
    return Double(values.reduce(0, +)) / Double(values.count)
  }
}
