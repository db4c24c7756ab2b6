internal import Foundation

/// The checks every backend applies to a sale before it is stored.
public enum SaleChecks {
  /// The latest sale date accepted: `StoreLimits.saleDaysAhead` days from today, in UTC.
  public static func latestSaleDate() -> String {
    let today = Int(Date().timeIntervalSince1970 / 86_400)
    return CivilDate(dayNumber: today + StoreLimits.saleDaysAhead).text
  }

  /// The sale's canonical employee guid, or why it is refused: a guid that is not a UUID, an
  /// amount below 0 or over `StoreLimits.largestSaleCents`, a malformed date, or one before
  /// `StoreLimits.earliestSaleDate` or after `latest`.
  public static func check(_ sale: SaleRow, latest: String) -> Result<String, StoreError> {
    guard let guid = EmployeeValidation.canonicalGUID(sale.employeeGUID) else {
      return .failure(
        StoreError(
          .invalidArgument,
          "employee_guid \(ClientText.quoted(sale.employeeGUID)) is not a UUID"
        )
      )
    }
    guard (0 ... StoreLimits.largestSaleCents).contains(sale.amountCents) else {
      return .failure(
        StoreError(
          .invalidArgument,
          "amount_cents \(sale.amountCents) must be 0 to \(StoreLimits.largestSaleCents)"
        )
      )
    }
    guard EmployeeValidation.isValidDate(sale.date) else {
      return .failure(
        StoreError(
          .invalidArgument,
          "date \(ClientText.quoted(sale.date)) is not a YYYY-MM-DD date"
        )
      )
    }
    guard sale.date >= StoreLimits.earliestSaleDate, sale.date <= latest else {
      return .failure(
        StoreError(
          .invalidArgument,
          "date \(sale.date) is outside \(StoreLimits.earliestSaleDate) to \(latest)"
        )
      )
    }
    return .success(guid)
  }
}
