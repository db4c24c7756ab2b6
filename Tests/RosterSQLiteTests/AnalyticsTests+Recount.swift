import Foundation
import GRDB
import RosterSeed
import StoreContract
import TestSupport
import Testing

@testable import RosterDomain
@testable import RosterSQLite

extension AnalyticsTests {
  /// Every derived table against a full recount in SQL; the first difference, or nil.
  static func drift(_ store: SQLiteStore) throws -> String? {
    let checks: [(String, String, String)] = [
      (
        "department counters",
        "SELECT department, headcount, active_count, vacation_days_total FROM department_stats",
        """
        SELECT department, count(*), sum(active), sum(vacation_days) FROM employees
        GROUP BY department
        """
      ),
      (
        "employee sales counters",
        "SELECT id, sales_count, sales_total_cents FROM employees",
        """
        SELECT e.id, count(s.id), coalesce(sum(s.amount_cents), 0) FROM employees e
        LEFT JOIN sales s ON s.employee_id = e.id GROUP BY e.id
        """
      ),
      (
        "daily rollups",
        "SELECT employee_id, day, count, total_cents FROM sales_daily",
        "SELECT employee_id, date, count(*), sum(amount_cents) FROM sales GROUP BY 1, 2"
      ),
      (
        "monthly department rollups",
        "SELECT department, month, count, total_cents FROM sales_monthly_department",
        """
        SELECT e.department, substr(s.date, 1, 7), count(*), sum(s.amount_cents)
        FROM sales s JOIN employees e ON e.id = s.employee_id GROUP BY 1, 2
        """
      ),
      (
        "daily statistics per department",
        "SELECT day, department, count, total_cents, squares, min_cents, max_cents FROM sales_daily_department",
        """
        SELECT s.date, e.department, count(*), sum(s.amount_cents), sum(s.amount_cents * s.amount_cents),
               min(s.amount_cents), max(s.amount_cents)
        FROM sales s JOIN employees e ON e.id = s.employee_id GROUP BY 1, 2
        """
      ),
      (
        "monthly totals",
        "SELECT month, count, total_cents FROM sales_monthly WHERE count > 0",
        "SELECT substr(date, 1, 7), count(*), sum(amount_cents) FROM sales GROUP BY 1"
      ),
      // The same recount `roster check` runs.
      SQLiteMaintenance.recounts.first { $0.name == "sales_amount_buckets" }.map {
        ("amount buckets", $0.kept, $0.recount)
      }!,
    ]
    return try store.read { db in
      for (name, kept, recount) in checks {
        func values(_ sql: String) throws -> Set<String> {
          Set(
            try Row.fetchAll(db, sql: sql).map {
              $0.databaseValues.map(\.description).joined(separator: "|")
            }
          )
        }
        let a = try values(kept)
        let b = try values(recount)
        if a != b {
          return
            "\(name): kept-only \(a.subtracting(b).sorted().prefix(3)), recount-only \(b.subtracting(a).sorted().prefix(3))"
        }
      }
      return nil
    }
  }
}
