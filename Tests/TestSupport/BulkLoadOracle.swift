/// What a bulk load must end with on either backend, as queries whose rows are compared with
/// those of the same rows written through the triggers: each counter and rollup the two
/// backends keep alike, keyed by guid rather than row id, one line per row.
public enum BulkLoadOracle {
  public static let sharedQueries: [String: String] = [
    "employees' sales counters":
      "SELECT guid || ' ' || sales_count || ' ' || sales_total_cents FROM employees",
    "daily sales": """
    SELECT e.guid || ' ' || d.day || ' ' || d.count || ' ' || d.total_cents
    FROM sales_daily d JOIN employees e ON e.id = d.employee_id
    """,
    "daily sales per department": """
    SELECT day || department || count || ' ' || total_cents || ' ' || squares || ' ' || min_cents || ' ' || max_cents
    FROM sales_daily_department
    """,
    "monthly sales per department":
      "SELECT department || month || ' ' || count || ' ' || total_cents FROM sales_monthly_department",
    "amount buckets":
      "SELECT period || department || bucket || ' ' || count FROM sales_amount_buckets",
    "departments":
      "SELECT department || ' ' || headcount || ' ' || active_count || ' ' || vacation_days_total FROM department_stats",
  ]
}
